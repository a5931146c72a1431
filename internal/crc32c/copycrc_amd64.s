// Fused copy and CRC-32C for amd64 (AVX2, VPCLMULQDQ, SSE4.2); see
// copycrc.go for the method and the algebra. The fold constants are
// x^n mod P for the CRC-32C (Castagnoli) polynomial, bit-reflected;
// TestCopyCRCFoldConstants derives every one.

#include "textflag.h"

// Per 16-byte lane: qword 0 = x^(D+31) mod P, qword 1 = x^(D-33) mod P, for a
// fold forward over D bits. Each is duplicated into both lanes of a YMM.

// D = 1024 (128 bytes): the main loop.
DATA copycrcK1024<>+0(SB)/8, $0x6992cea2
DATA copycrcK1024<>+8(SB)/8, $0x0d3b6092
DATA copycrcK1024<>+16(SB)/8, $0x6992cea2
DATA copycrcK1024<>+24(SB)/8, $0x0d3b6092
GLOBL copycrcK1024<>(SB), RODATA|NOPTR, $32

// D = 768, 512, 256: the four accumulators onto the last one.
DATA copycrcK768<>+0(SB)/8, $0xc49f4f67
DATA copycrcK768<>+8(SB)/8, $0x0715ce53
DATA copycrcK768<>+16(SB)/8, $0xc49f4f67
DATA copycrcK768<>+24(SB)/8, $0x0715ce53
GLOBL copycrcK768<>(SB), RODATA|NOPTR, $32

DATA copycrcK512<>+0(SB)/8, $0x740eef02
DATA copycrcK512<>+8(SB)/8, $0x9e4addf8
DATA copycrcK512<>+16(SB)/8, $0x740eef02
DATA copycrcK512<>+24(SB)/8, $0x9e4addf8
GLOBL copycrcK512<>(SB), RODATA|NOPTR, $32

DATA copycrcK256<>+0(SB)/8, $0x3da6d0cb
DATA copycrcK256<>+8(SB)/8, $0xba4fc28e
DATA copycrcK256<>+16(SB)/8, $0x3da6d0cb
DATA copycrcK256<>+24(SB)/8, $0xba4fc28e
GLOBL copycrcK256<>(SB), RODATA|NOPTR, $32

// D = 128: the low lane onto the high lane.
DATA copycrcK128<>+0(SB)/8, $0xf20c0dfe
DATA copycrcK128<>+8(SB)/8, $0x493c7d27
GLOBL copycrcK128<>(SB), RODATA|NOPTR, $16

// FOLD sets acc = acc*K (folded forward by the distance in K) xor data,
// using tmp; data is clobbered.
#define FOLD(K, acc, data, tmp) \
	VPCLMULQDQ $0x00, K, acc, tmp; \
	VPCLMULQDQ $0x11, K, acc, acc; \
	VPXOR      tmp, data, data;    \
	VPXOR      data, acc, acc

// LOAD4 reads the next 128 bytes of src into Y4..Y7.
#define LOAD4 \
	VMOVDQU 0(SI), Y4;  \
	VMOVDQU 32(SI), Y5; \
	VMOVDQU 64(SI), Y6; \
	VMOVDQU 96(SI), Y7

// STORE4 writes Y4..Y7 to the next 128 bytes of dst with the move op.
#define STORE4(op) \
	op Y4, 0(DI);  \
	op Y5, 32(DI); \
	op Y6, 64(DI); \
	op Y7, 96(DI)

// FOLD4 folds Y4..Y7 into the accumulators Y0..Y3.
#define FOLD4 \
	FOLD(Y15, Y0, Y4, Y8);  \
	FOLD(Y15, Y1, Y5, Y9);  \
	FOLD(Y15, Y2, Y6, Y10); \
	FOLD(Y15, Y3, Y7, Y11)

// NEXT128 advances the vector pointers and counts down CX.
#define NEXT128 \
	ADDQ $128, SI; \
	ADDQ $128, DI; \
	SUBQ $128, CX

// REDUCE sets out to CRC(0, M) (not inverted), where the accumulators
// Y0..Y3 hold M folded; t1 and t2 are scratch. Clobbers Y0..Y3, Y8..Y14.
#define REDUCE(t1, t2, out) \
	/* Fold Y0, Y1, Y2 onto Y3 (96, 64 and 32 bytes further on). */ \
	VMOVDQU copycrcK768<>(SB), Y12;                                 \
	VMOVDQU copycrcK512<>(SB), Y13;                                 \
	VMOVDQU copycrcK256<>(SB), Y14;                                 \
	FOLD(Y12, Y0, Y3, Y8);                                          \
	FOLD(Y13, Y1, Y0, Y9);                                          \
	FOLD(Y14, Y2, Y1, Y10);                                         \
	/* Y2 is all four; fold its low lane onto its high lane. */     \
	VEXTRACTI128 $1, Y2, X3;                                        \
	VMOVDQU      copycrcK128<>(SB), X14;                            \
	FOLD(X14, X2, X3, X8);                                          \
	/* The 128-bit remainder R is congruent to M, so              */ \
	/* CRC(0, M) = CRC(0, R) = R*x^32 mod P: two CRC32Qs.         */ \
	VMOVQ   X2, t1;                                                 \
	VPEXTRQ $1, X2, t2;                                             \
	XORL    out, out;                                               \
	CRC32Q  t1, out;                                                \
	CRC32Q  t2, out

// func copyCRCFold(dst, src *byte, n int, crc uint32, nt bool) uint32
//
// Requires AVX2, VPCLMULQDQ and SSE4.2; n is a positive multiple of 128;
// when nt, dst is 32-byte aligned. crc and the result are the CRC register
// (not inverted).
TEXT ·copyCRCFold(SB), NOSPLIT, $0-36
	MOVQ    dst+0(FP), DI
	MOVQ    src+8(FP), SI
	MOVQ    n+16(FP), CX
	MOVL    crc+24(FP), AX
	MOVBLZX nt+28(FP), DX

	VMOVDQU copycrcK1024<>(SB), Y15

	// The first 128 bytes are the accumulators, with crc xored into the
	// first four: CRC(crc, M) = CRC(0, M xor crc), with crc over the first
	// four bytes of M.
	LOAD4
	TESTQ   DX, DX
	JNZ     ntfirst
	STORE4(VMOVDQU)
	JMP     first

ntfirst:
	STORE4(VMOVNTDQ)

first:
	VMOVD   AX, X0 // zeroes the rest of Y0
	VPXOR   Y4, Y0, Y0
	VMOVDQU Y5, Y1
	VMOVDQU Y6, Y2
	VMOVDQU Y7, Y3
	NEXT128
	JZ      reduce
	TESTQ   DX, DX
	JNZ     ntloop

loop:
	LOAD4
	STORE4(VMOVDQU)
	FOLD4
	NEXT128
	JNZ loop
	JMP reduce

ntloop:
	LOAD4
	STORE4(VMOVNTDQ)
	FOLD4
	NEXT128
	JNZ ntloop

reduce:
	// Order the non-temporal stores before any later store.
	TESTQ DX, DX
	JZ    fenced
	SFENCE

fenced:
	REDUCE(R8, R9, AX)
	VZEROUPPER
	MOVL AX, ret+32(FP)
	RET

// func crcFold(src *byte, n int, crc uint32) uint32
//
// copyCRCFold without the copy: the CRC register crc (not inverted)
// updated with n bytes of src, n a positive multiple of 128. Four
// independent accumulators keep more loads in flight than the three
// serial CRC32Q streams of hash/crc32, which is what lets it read memory
// faster than those (see checksum_fold.go).
TEXT ·crcFold(SB), NOSPLIT, $0-28
	MOVQ src+0(FP), SI
	MOVQ n+8(FP), CX
	MOVL crc+16(FP), AX

	VMOVDQU copycrcK1024<>(SB), Y15

	LOAD4
	VMOVD   AX, X0 // zeroes the rest of Y0
	VPXOR   Y4, Y0, Y0
	VMOVDQU Y5, Y1
	VMOVDQU Y6, Y2
	VMOVDQU Y7, Y3
	ADDQ    $128, SI
	SUBQ    $128, CX
	JZ      foldreduce

foldloop:
	LOAD4
	FOLD4
	ADDQ $128, SI
	SUBQ $128, CX
	JNZ  foldloop

foldreduce:
	REDUCE(R8, R9, AX)
	VZEROUPPER
	MOVL AX, ret+24(FP)
	RET

// func copyCRCCPUID(leaf, sub uint32) (eax, ebx, ecx, edx uint32)
TEXT ·copyCRCCPUID(SB), NOSPLIT, $0-24
	MOVL leaf+0(FP), AX
	MOVL sub+4(FP), CX
	CPUID
	MOVL AX, eax+8(FP)
	MOVL BX, ebx+12(FP)
	MOVL CX, ecx+16(FP)
	MOVL DX, edx+20(FP)
	RET
