package client

import "testing"

func TestConnStatusString(t *testing.T) {
	for s, want := range map[ConnStatus]string{
		ConnConnecting: "connecting", ConnConnected: "connected", ConnReconnecting: "reconnecting",
		ConnClosed: "closed", ConnStatus(9): "ConnStatus(9)",
	} {
		if got := s.String(); got != want {
			t.Errorf("%d.String() = %q, want %q", int(s), got, want)
		}
	}
}
