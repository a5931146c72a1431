package respcoord

import (
	"errors"
	"fmt"

	kvringv1 "github.com/kvring/kvring/proto/kvring/v1"
	"github.com/kvring/kvring/transfer"
)

// getSink is a read's coord.ChunkSink, in process: it gathers each chunk's
// bytes into a buffer of its own and hands every chunk (or its miss) to
// each, in order.
type getSink struct {
	n    int
	each func(i int, data []byte, err error) error

	next   int    // the next index handed to each
	cur    int    // the index being gathered; -1 none
	buf    []byte // its bytes
	filled int
	err    error
}

// Found starts gathering chunk h.Index into a buffer of its own: each
// keeps it (the reply is written from it after Found returns).
func (s *getSink) Found(h *kvringv1.ChunkHeader) error {
	i, err := s.start(h.GetIndex())
	if err != nil {
		return err
	}
	s.cur, s.buf, s.filled = i, make([]byte, h.GetChunk().GetSize()), 0
	return nil
}

// Miss hands chunk i over as a miss (nil data, nil err) when it is not
// found, else with err (it wraps transfer.ErrUnavailable).
func (s *getSink) Miss(i uint32, err error) error {
	idx, serr := s.start(i)
	if serr != nil {
		return serr
	}
	if !errors.Is(err, transfer.ErrUnavailable) {
		err = nil
	}
	return s.hand(idx, nil, err)
}

// start ends the chunk being gathered and hands every index before i over
// as skipped.
func (s *getSink) start(i uint32) (int, error) {
	if s.err != nil {
		return 0, s.err
	}
	if err := s.finish(); err != nil {
		return 0, err
	}
	idx := int(i)
	if idx < s.next || idx >= s.n {
		return 0, fmt.Errorf("BUG: get answered chunk %d after %d of %d", idx, s.next, s.n)
	}
	s.missUntil(idx, fmt.Errorf("%w: the read skipped it", transfer.ErrUnavailable))
	return idx, s.err
}

// Data copies b, at offset off of the chunk being gathered.
func (s *getSink) Data(i uint32, off uint64, b []byte) error {
	if s.err != nil || s.cur < 0 {
		return s.err
	}
	if int(i) != s.cur || off != uint64(s.filled) || s.filled+len(b) > len(s.buf) {
		return fmt.Errorf("BUG: chunk %d: bytes of chunk %d at offset %d do not follow byte %d", s.cur, i, off, s.filled)
	}
	s.filled += copy(s.buf[s.filled:], b)
	return nil
}

// finish hands over the chunk being gathered: complete, or an error (its
// frames stopped short).
func (s *getSink) finish() error {
	if s.cur < 0 {
		return nil
	}
	i, buf := s.cur, s.buf
	s.cur, s.buf = -1, nil
	if s.filled != len(buf) {
		return s.hand(i, nil, fmt.Errorf("%w: its bytes stopped after %d of %d", transfer.ErrUnavailable, s.filled, len(buf)))
	}
	return s.hand(i, buf, nil)
}

func (s *getSink) hand(i int, data []byte, err error) error {
	s.next = i + 1
	if e := s.each(i, data, err); e != nil {
		s.err = e
	}
	return s.err
}

// missUntil hands every index before i over with err.
func (s *getSink) missUntil(i int, err error) {
	for s.next < i {
		s.hand(s.next, nil, err)
	}
}

// rest hands every index not handed over yet with err (the call's).
func (s *getSink) rest(err error) { s.missUntil(s.n, err) }
