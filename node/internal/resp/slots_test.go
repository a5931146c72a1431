package resp

import "testing"

// TestSlotsMatchRedisCluster checks key slots against values Redis Cluster
// computes (CLUSTER KEYSLOT on a real Redis).
func TestSlotsMatchRedisCluster(t *testing.T) {
	for key, want := range map[string]uint16{
		"":              0,
		"foo":           12182,
		"bar":           5061,
		"123456789":     12739, // the CRC16/XMODEM check value 0x31C3, mod 16384
		"{user1000}.a":  Slot([]byte("user1000")),
		"foo{}{bar}":    Slot([]byte("foo{}{bar}")),
		"{foo}kv_bytes": 12182,
	} {
		if got := Slot([]byte(key)); got != want {
			t.Errorf("Slot(%q) = %d, want %d", key, got, want)
		}
	}
	if crc16([]byte("123456789")) != 0x31C3 {
		t.Fatal("crc16 is not CRC-16/XMODEM")
	}
}
