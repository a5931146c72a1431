package trace

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"
)

// readmeSample is the two-request example from the Mooncake README.
const readmeSample = `{"timestamp": 27482, "input_length": 6955, "output_length": 52, "hash_ids": [46, 47, 48, 49, 50, 51, 52, 53, 54, 55, 56, 57, 2353, 2354]}
{"timestamp": 30535, "input_length": 6472, "output_length": 26, "hash_ids": [46, 47, 48, 49, 50, 51, 52, 53, 54, 55, 56, 57, 2366]}
`

func TestReadParsesMooncakeLines(t *testing.T) {
	t.Parallel()
	reqs, err := Read(strings.NewReader(readmeSample))
	if err != nil {
		t.Fatal(err)
	}
	want := []Request{
		{27482 * time.Millisecond, 6955, 52, []int64{46, 47, 48, 49, 50, 51, 52, 53, 54, 55, 56, 57, 2353, 2354}},
		{30535 * time.Millisecond, 6472, 26, []int64{46, 47, 48, 49, 50, 51, 52, 53, 54, 55, 56, 57, 2366}},
	}
	if !reflect.DeepEqual(reqs, want) {
		t.Errorf("Read = %+v\nwant %+v", reqs, want)
	}
}

func TestReadAcceptsBlankLinesFractionalTimestampsAndUnknownFields(t *testing.T) {
	t.Parallel()
	in := "\n" + `{"timestamp": 1.5, "input_length": 0, "output_length": 0, "hash_ids": [], "extra": true}` + "\n\n  \n"
	reqs, err := Read(strings.NewReader(in))
	if err != nil {
		t.Fatal(err)
	}
	if len(reqs) != 1 || reqs[0].Timestamp != 1500*time.Microsecond || len(reqs[0].HashIDs) != 0 {
		t.Errorf("Read = %+v", reqs)
	}
	if reqs, err := Read(strings.NewReader("")); err != nil || len(reqs) != 0 {
		t.Errorf("Read(empty) = %v, %v; want no requests, no error", reqs, err)
	}
}

func TestReadAcceptsLinesLongerThanBufioDefault(t *testing.T) {
	t.Parallel()
	ids := make([]string, 20_000) // ~160 KB line, above bufio's 64 KiB default
	for i := range ids {
		ids[i] = fmt.Sprint(i + 1_000_000)
	}
	in := fmt.Sprintf(`{"timestamp": 0, "input_length": %d, "output_length": 1, "hash_ids": [%s]}`,
		len(ids)*BlockTokens, strings.Join(ids, ","))
	reqs, err := Read(strings.NewReader(in))
	if err != nil {
		t.Fatal(err)
	}
	if len(reqs) != 1 || len(reqs[0].HashIDs) != len(ids) {
		t.Errorf("got %d requests", len(reqs))
	}
}

func TestReadReportsMalformedLineNumber(t *testing.T) {
	t.Parallel()
	const good = `{"timestamp": 0, "input_length": 513, "output_length": 1, "hash_ids": [1, 2]}`
	for _, tc := range []struct {
		name    string
		line    string
		want    error  // sentinel, or nil for a JSON error
		wantMsg string // substring of the message
	}{
		{"syntax", `{"timestamp": 0, "input_length": 1`, nil, "unexpected end of JSON input"},
		{"not an object", `[1, 2]`, nil, "cannot unmarshal array"},
		{"trailing data", good + ` {}`, nil, "invalid character"},
		{"wrong type", `{"timestamp": 0, "input_length": "513", "output_length": 1, "hash_ids": [1, 2]}`, nil, "input_length"},
		{"fractional id", `{"timestamp": 0, "input_length": 1, "output_length": 1, "hash_ids": [1.5]}`, nil, "hash_ids"},
		{"missing timestamp", `{"input_length": 1, "output_length": 1, "hash_ids": [1]}`, ErrMissingField, "timestamp"},
		{"missing input_length", `{"timestamp": 0, "output_length": 1, "hash_ids": [1]}`, ErrMissingField, "input_length"},
		{"missing output_length", `{"timestamp": 0, "input_length": 1, "hash_ids": [1]}`, ErrMissingField, "output_length"},
		{"missing hash_ids", `{"timestamp": 0, "input_length": 1, "output_length": 1}`, ErrMissingField, "hash_ids"},
		{"null hash_ids", `{"timestamp": 0, "input_length": 0, "output_length": 1, "hash_ids": null}`, ErrMissingField, "hash_ids"},
		{"negative timestamp", `{"timestamp": -1, "input_length": 1, "output_length": 1, "hash_ids": [1]}`, ErrNegative, "timestamp"},
		{"negative input_length", `{"timestamp": 0, "input_length": -1, "output_length": 1, "hash_ids": []}`, ErrNegative, "input_length"},
		{"negative output_length", `{"timestamp": 0, "input_length": 1, "output_length": -1, "hash_ids": [1]}`, ErrNegative, "output_length"},
		{"too few ids", `{"timestamp": 0, "input_length": 513, "output_length": 1, "hash_ids": [1]}`, ErrHashCount, "needs 2 ids, got 1"},
		{"too many ids", `{"timestamp": 0, "input_length": 512, "output_length": 1, "hash_ids": [1, 2]}`, ErrHashCount, "needs 1 ids, got 2"},
		{"ids for empty input", `{"timestamp": 0, "input_length": 0, "output_length": 1, "hash_ids": [1]}`, ErrHashCount, "needs 0 ids"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			// The bad line is line 4: after a good line, a blank line and a good line.
			in := good + "\n\n" + good + "\n" + tc.line + "\n" + good + "\n"
			reqs, err := Read(strings.NewReader(in))
			if err == nil {
				t.Fatalf("Read = %d requests, no error", len(reqs))
			}
			var le *LineError
			if !errors.As(err, &le) || le.Line != 4 {
				t.Fatalf("error %q is not a *LineError for line 4", err)
			}
			if !strings.HasPrefix(err.Error(), "line 4: ") || !strings.Contains(err.Error(), tc.wantMsg) {
				t.Errorf("error %q: want prefix %q and substring %q", err, "line 4: ", tc.wantMsg)
			}
			if tc.want != nil && !errors.Is(err, tc.want) {
				t.Errorf("error %q is not %v", err, tc.want)
			}
			if tc.want == nil {
				var se *json.SyntaxError
				var te *json.UnmarshalTypeError
				if !errors.As(err, &se) && !errors.As(err, &te) {
					t.Errorf("error %q does not wrap a JSON error", err)
				}
			}
		})
	}
}

func TestScannerStopsAtFirstBadLineAfterYieldingGoodOnes(t *testing.T) {
	t.Parallel()
	in := readmeSample + "oops\n" + readmeSample
	sc := NewScanner(strings.NewReader(in))
	n := 0
	for sc.Scan() {
		n++
	}
	if n != 2 || sc.Line() != 3 {
		t.Errorf("scanned %d requests up to line %d, want 2 up to line 3", n, sc.Line())
	}
	var le *LineError
	if !errors.As(sc.Err(), &le) || le.Line != 3 {
		t.Errorf("Err = %v, want a *LineError for line 3", sc.Err())
	}
	if sc.Scan() {
		t.Error("Scan after an error returned true")
	}
}

func TestReadFileNamesMissingPath(t *testing.T) {
	t.Parallel()
	p := filepath.Join(t.TempDir(), "absent.jsonl")
	_, err := ReadFile(p)
	if !errors.Is(err, fs.ErrNotExist) || !strings.Contains(err.Error(), p) {
		t.Errorf("ReadFile(%q) error = %v; want fs.ErrNotExist naming the path", p, err)
	}
}
