package nsschema

import (
	"encoding/json"
	"reflect"
	"testing"
)

// TestProtoRoundTripKeepsEveryField: a schema converted to the wire message
// and back is the same schema, every field included (a field added to one
// side only fails here).
func TestProtoRoundTripKeepsEveryField(t *testing.T) {
	s := Schema{Model: "m", Dtype: "bf16", TokensPerChunk: 16, Layout: "nhd", HashScheme: "sha256", TPRank: 1, TPSize: 2,
		ChunksPerGroup: 32, Extra: map[string]string{"k": "v"}}
	v := reflect.ValueOf(s)
	for i := range v.NumField() {
		if v.Field(i).IsZero() {
			t.Fatalf("the test schema leaves %s zero: set every field", v.Type().Field(i).Name)
		}
	}
	if got := FromProto(s.Proto()); !reflect.DeepEqual(got, s) {
		t.Fatalf("round trip: %+v, want %+v", got, s)
	}
	if got := FromProto(nil); !reflect.DeepEqual(got, Schema{}) {
		t.Fatalf("FromProto(nil) = %+v, want the zero schema", got)
	}
}

// TestJSONNamesTheGroupSize: the JSON form (admin API, local socket) names
// chunks_per_group when set and leaves it out when zero.
func TestJSONNamesTheGroupSize(t *testing.T) {
	for _, tc := range []struct {
		k    uint32
		want string
	}{
		{0, `{"model":"m","dtype":"","tokens_per_chunk":16,"layout":"","hash_scheme":"","tp_rank":0,"tp_size":0}`},
		{8, `{"model":"m","dtype":"","tokens_per_chunk":16,"layout":"","hash_scheme":"","tp_rank":0,"tp_size":0,"chunks_per_group":8}`},
	} {
		b, err := json.Marshal(Schema{Model: "m", TokensPerChunk: 16, ChunksPerGroup: tc.k})
		if err != nil || string(b) != tc.want {
			t.Fatalf("k=%d: %s, %v; want %s", tc.k, b, err, tc.want)
		}
	}
}
