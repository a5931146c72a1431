// The checksum-only fold kernel with 512-bit registers (AVX-512F and
// VPCLMULQDQ on ZMM): the method of crcFold in copycrc_amd64.s, four
// accumulators of 64 bytes each, 256 bytes a step. The constants are
// x^(D+31) and x^(D-33) mod P for a fold over D bits, as there;
// TestCRCFold512Constants derives them.

#include "textflag.h"

// D = 2048 (256 bytes): the main loop.
DATA crcfoldK2048<>+0(SB)/8, $0xdcb17aa4
DATA crcfoldK2048<>+8(SB)/8, $0xb9e02b86
GLOBL crcfoldK2048<>(SB), RODATA|NOPTR, $16

// D = 1536, 1024, 512: the accumulators onto the last one.
DATA crcfoldK1536<>+0(SB)/8, $0xa87ab8a8
DATA crcfoldK1536<>+8(SB)/8, $0xab7aff2a
GLOBL crcfoldK1536<>(SB), RODATA|NOPTR, $16

DATA crcfoldK1024<>+0(SB)/8, $0x6992cea2
DATA crcfoldK1024<>+8(SB)/8, $0x0d3b6092
GLOBL crcfoldK1024<>(SB), RODATA|NOPTR, $16

DATA crcfoldK512<>+0(SB)/8, $0x740eef02
DATA crcfoldK512<>+8(SB)/8, $0x9e4addf8
GLOBL crcfoldK512<>(SB), RODATA|NOPTR, $16

// D = 256: the low half of a ZMM onto its high half.
DATA crcfoldK256<>+0(SB)/8, $0x3da6d0cb
DATA crcfoldK256<>+8(SB)/8, $0xba4fc28e
GLOBL crcfoldK256<>(SB), RODATA|NOPTR, $16

// D = 128: the low lane of a YMM onto its high lane.
DATA crcfoldK128<>+0(SB)/8, $0xf20c0dfe
DATA crcfoldK128<>+8(SB)/8, $0x493c7d27
GLOBL crcfoldK128<>(SB), RODATA|NOPTR, $16

// FOLDZ sets acc = acc*K (folded forward by the distance in K) xor data,
// using tmp: one three-way xor.
#define FOLDZ(K, acc, data, tmp) \
	VPCLMULQDQ $0x00, K, acc, tmp; \
	VPCLMULQDQ $0x11, K, acc, acc; \
	VPTERNLOGD $0x96, tmp, data, acc

// LOADZ4 reads the next 256 bytes of src into Z4..Z7.
#define LOADZ4 \
	VMOVDQU64 0(SI), Z4;   \
	VMOVDQU64 64(SI), Z5;  \
	VMOVDQU64 128(SI), Z6; \
	VMOVDQU64 192(SI), Z7

// REDUCEZ sets AX to CRC(0, M) (not inverted), where the accumulators
// Z0..Z3 hold M folded. Clobbers Z0..Z3, Z8..Z14, R8, R9.
#define REDUCEZ \
	/* Z0, Z1, Z2 onto Z3 (192, 128 and 64 bytes further on). */ \
	VBROADCASTI32X4 crcfoldK1536<>(SB), Z12; \
	VBROADCASTI32X4 crcfoldK1024<>(SB), Z13; \
	VBROADCASTI32X4 crcfoldK512<>(SB), Z14; \
	FOLDZ(Z12, Z0, Z3, Z8); \
	FOLDZ(Z13, Z1, Z0, Z9); \
	FOLDZ(Z14, Z2, Z1, Z10); \
	/* Z2 is all four: its low 32 bytes onto its high 32. */ \
	VEXTRACTI64X4   $1, Z2, Y3; \
	VBROADCASTI32X4 crcfoldK256<>(SB), Z14; \
	FOLDZ(Z14, Z2, Z3, Z8); \
	/* Y2 holds the rest: its low lane onto its high lane. */ \
	VEXTRACTI128 $1, Y2, X3; \
	VMOVDQU      crcfoldK128<>(SB), X14; \
	VPCLMULQDQ   $0x00, X14, X2, X8; \
	VPCLMULQDQ   $0x11, X14, X2, X2; \
	VPXOR        X8, X3, X3; \
	VPXOR        X3, X2, X2; \
	/* CRC(0, M) = CRC(0, R) = R*x^32 mod P: two CRC32Qs. */ \
	VMOVQ   X2, R8; \
	VPEXTRQ $1, X2, R9; \
	XORL    AX, AX; \
	CRC32Q  R8, AX; \
	CRC32Q  R9, AX

// func crcFold512(src *byte, n int, crc uint32) uint32
//
// Requires AVX-512F, VPCLMULQDQ and SSE4.2; n is a positive multiple of
// 256. crc and the result are the CRC register (not inverted).
TEXT ·crcFold512(SB), NOSPLIT, $0-28
	MOVQ src+0(FP), SI
	MOVQ n+8(FP), CX
	MOVL crc+16(FP), AX

	VBROADCASTI32X4 crcfoldK2048<>(SB), Z15

	LOADZ4
	VMOVD     AX, X0 // zeroes the rest of Z0
	VPXORQ    Z4, Z0, Z0
	VMOVDQU64 Z5, Z1
	VMOVDQU64 Z6, Z2
	VMOVDQU64 Z7, Z3
	ADDQ      $256, SI
	SUBQ      $256, CX
	JZ        reduce

loop:
	LOADZ4
	FOLDZ(Z15, Z0, Z4, Z8)
	FOLDZ(Z15, Z1, Z5, Z9)
	FOLDZ(Z15, Z2, Z6, Z10)
	FOLDZ(Z15, Z3, Z7, Z11)
	ADDQ $256, SI
	SUBQ $256, CX
	JNZ  loop

reduce:
	REDUCEZ
	VZEROUPPER
	MOVL    AX, ret+24(FP)
	RET

// STOREZ4 writes Z4..Z7 to the next 256 bytes of dst with the move op.
#define STOREZ4(op) \
	op Z4, 0(DI);   \
	op Z5, 64(DI);  \
	op Z6, 128(DI); \
	op Z7, 192(DI)

// FOLDZ4 folds Z4..Z7 into the accumulators Z0..Z3.
#define FOLDZ4 \
	FOLDZ(Z15, Z0, Z4, Z8);  \
	FOLDZ(Z15, Z1, Z5, Z9);  \
	FOLDZ(Z15, Z2, Z6, Z10); \
	FOLDZ(Z15, Z3, Z7, Z11)

// NEXT256 advances the vector pointers and counts down CX.
#define NEXT256 \
	ADDQ $256, SI; \
	ADDQ $256, DI; \
	SUBQ $256, CX

// func copyCRCFold512(dst, src *byte, n int, crc uint32, nt bool) uint32
//
// copyCRCFold with 512-bit registers. Requires AVX-512F, VPCLMULQDQ and
// SSE4.2; n is a positive multiple of 256; when nt, dst is 64-byte
// aligned. crc and the result are the CRC register (not inverted).
TEXT ·copyCRCFold512(SB), NOSPLIT, $0-36
	MOVQ    dst+0(FP), DI
	MOVQ    src+8(FP), SI
	MOVQ    n+16(FP), CX
	MOVL    crc+24(FP), AX
	MOVBLZX nt+28(FP), DX

	VBROADCASTI32X4 crcfoldK2048<>(SB), Z15

	LOADZ4
	TESTQ DX, DX
	JNZ   ntfirst
	STOREZ4(VMOVDQU64)
	JMP   first

ntfirst:
	STOREZ4(VMOVNTDQ)

first:
	VMOVD     AX, X0 // zeroes the rest of Z0
	VPXORQ    Z4, Z0, Z0
	VMOVDQU64 Z5, Z1
	VMOVDQU64 Z6, Z2
	VMOVDQU64 Z7, Z3
	NEXT256
	JZ        creduce
	TESTQ     DX, DX
	JNZ       ntloop

cloop:
	LOADZ4
	STOREZ4(VMOVDQU64)
	FOLDZ4
	NEXT256
	JNZ cloop
	JMP creduce

ntloop:
	LOADZ4
	STOREZ4(VMOVNTDQ)
	FOLDZ4
	NEXT256
	JNZ ntloop

creduce:
	// Order the non-temporal stores before any later store.
	TESTQ DX, DX
	JZ    fenced
	SFENCE

fenced:
	REDUCEZ
	VZEROUPPER
	MOVL AX, ret+32(FP)
	RET
