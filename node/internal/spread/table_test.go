package spread

import (
	"testing"
	"time"

	"github.com/kvring/kvring/store"
)

// TestAHintDoesNotNarrowTheWidthOfAGroupThisNodeHolds: a member that
// reports a group not spread (it lost its copies, or knows nothing of the
// group) ends what a coordinator knows, but not the width of a group this
// node keeps copies of: the hand-off keeps the copies by it.
func TestAHintDoesNotNarrowTheWidthOfAGroupThisNodeHolds(t *testing.T) {
	now := time.Unix(1000, 0)
	tb := NewTable(TableConfig{Now: func() time.Time { return now }})
	held, hinted := Key{NS: "ns", Place: store.ID{1}}, Key{NS: "ns", Place: store.ID{2}}
	tb.Hold(held, 4, now.Add(time.Minute))
	tb.Hint(hinted, 4, now.Add(15*time.Second))
	tb.Hint(held, 0, now.Add(15*time.Second))
	tb.Hint(hinted, 0, now.Add(15*time.Second))
	if w := tb.Width(held); w != 4 || !tb.Holds(held) {
		t.Fatalf("a held group is %d wide after a hint of 0 (holds %v), want 4", tb.Width(held), tb.Holds(held))
	}
	if w := tb.Width(hinted); w != 0 {
		t.Fatalf("a hinted group is %d wide after a hint of 0, want 0 (cooled down)", w)
	}
}
