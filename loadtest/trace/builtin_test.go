package trace

import (
	"reflect"
	"testing"
)

// TestBuiltinSyntheticIsTheTestdataTrace: the trace built into the binary is the file in testdata, request
// for request.
func TestBuiltinSyntheticIsTheTestdataTrace(t *testing.T) {
	t.Parallel()
	fromFile, err := ReadFile(defaultTracePath)
	if err != nil {
		t.Fatal(err)
	}
	builtin, err := ReadBuiltinSynthetic()
	if err != nil {
		t.Fatal(err)
	}
	if len(builtin) != 3993 || !reflect.DeepEqual(builtin, fromFile) {
		t.Fatalf("built-in trace has %d requests and differs from %s (%d requests)", len(builtin), defaultTracePath, len(fromFile))
	}
}
