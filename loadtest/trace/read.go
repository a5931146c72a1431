package trace

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"os"
	"time"
)

// maxLineBytes bounds one JSONL line (a 1M-token prompt is about 2,000 ids).
const maxLineBytes = 64 << 20

// Scanner reads a trace one request at a time, for traces too large to hold in
// memory. Blank lines are skipped. It is not safe for concurrent use; Scan blocks on
// the underlying reader.
type Scanner struct {
	s    *bufio.Scanner
	line int
	req  Request
	err  error
}

// NewScanner returns a Scanner reading JSONL from r.
func NewScanner(r io.Reader) *Scanner {
	s := bufio.NewScanner(r)
	s.Buffer(make([]byte, 0, 64<<10), maxLineBytes)
	return &Scanner{s: s}
}

// Scan advances to the next request and reports whether there is one. It returns
// false at the end of input or on the first error; see Err.
func (sc *Scanner) Scan() bool {
	if sc.err != nil {
		return false
	}
	for sc.s.Scan() {
		sc.line++
		b := bytes.TrimSpace(sc.s.Bytes())
		if len(b) == 0 {
			continue
		}
		req, err := parseLine(b)
		if err != nil {
			sc.err = &LineError{Line: sc.line, Err: err}
			return false
		}
		sc.req = req
		return true
	}
	if err := sc.s.Err(); err != nil {
		sc.err = fmt.Errorf("trace: cannot read line %d: %w", sc.line+1, err)
	}
	return false
}

// Request returns the request read by the last successful Scan.
func (sc *Scanner) Request() Request { return sc.req }

// Line returns the 1-based line number of the last line read.
func (sc *Scanner) Line() int { return sc.line }

// Err returns the first error met, or nil at a clean end of input. A malformed line
// yields a *LineError.
func (sc *Scanner) Err() error { return sc.err }

// Read parses a whole trace from r.
func Read(r io.Reader) ([]Request, error) {
	var reqs []Request
	sc := NewScanner(r)
	for sc.Scan() {
		reqs = append(reqs, sc.Request())
	}
	if err := sc.Err(); err != nil {
		return nil, err
	}
	return reqs, nil
}

// ReadFile parses the trace stored at path.
func ReadFile(path string) ([]Request, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("cannot open trace at %q: %w", path, err)
	}
	defer f.Close()
	reqs, err := Read(f)
	if err != nil {
		return nil, fmt.Errorf("cannot read trace at %q: %w", path, err)
	}
	return reqs, nil
}

// line is the wire form; pointers tell a missing field from a zero.
type line struct {
	Timestamp    *float64 `json:"timestamp"`
	InputLength  *int     `json:"input_length"`
	OutputLength *int     `json:"output_length"`
	HashIDs      []int64  `json:"hash_ids"`
}

func parseLine(b []byte) (Request, error) {
	var l line
	if err := json.Unmarshal(b, &l); err != nil {
		return Request{}, err
	}
	switch {
	case l.Timestamp == nil:
		return Request{}, fmt.Errorf("%w: timestamp", ErrMissingField)
	case l.InputLength == nil:
		return Request{}, fmt.Errorf("%w: input_length", ErrMissingField)
	case l.OutputLength == nil:
		return Request{}, fmt.Errorf("%w: output_length", ErrMissingField)
	case l.HashIDs == nil:
		return Request{}, fmt.Errorf("%w: hash_ids", ErrMissingField)
	}
	ts := *l.Timestamp * float64(time.Millisecond)
	switch {
	case *l.Timestamp < 0 || math.IsNaN(ts):
		return Request{}, fmt.Errorf("%w: timestamp %v", ErrNegative, *l.Timestamp)
	case ts >= math.MaxInt64:
		return Request{}, fmt.Errorf("trace: timestamp %v ms out of range", *l.Timestamp)
	case *l.InputLength < 0:
		return Request{}, fmt.Errorf("%w: input_length %d", ErrNegative, *l.InputLength)
	case *l.OutputLength < 0:
		return Request{}, fmt.Errorf("%w: output_length %d", ErrNegative, *l.OutputLength)
	}
	if want := BlocksFor(*l.InputLength); len(l.HashIDs) != want {
		return Request{}, fmt.Errorf("%w: input_length %d needs %d ids, got %d",
			ErrHashCount, *l.InputLength, want, len(l.HashIDs))
	}
	return Request{
		Timestamp:    time.Duration(math.Round(ts)),
		InputLength:  *l.InputLength,
		OutputLength: *l.OutputLength,
		HashIDs:      l.HashIDs,
	}, nil
}
