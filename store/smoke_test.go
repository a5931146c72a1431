package store

import (
	"bytes"
	"testing"
)

func TestPutGetRoundTrip(t *testing.T) {
	s := openTest(t, testConfig(t, 64<<20))
	id := testID(1)
	data := payload(id, 300<<10)
	mustPut(t, s, "ns", id, data)
	v, err := s.Get("ns", id)
	if err != nil {
		t.Fatal(err)
	}
	defer v.Release()
	if !bytes.Equal(v.Bytes(), data) {
		t.Fatal("bytes differ")
	}
	st := s.Stats()
	t.Logf("%+v", st)
}
