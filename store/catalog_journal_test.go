package store

import (
	"bytes"
	"encoding/binary"
	"errors"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// The catalog journal (catalog_journal.go): a flushed change is in the
// journal at once and in bbolt after a fold; a restart finds it either way.

func openTestCatalog(t *testing.T, dir string, log *slog.Logger) *catalog {
	t.Helper()
	if log == nil {
		log = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	c, err := openCatalog(dir, log, time.Now)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// crashCatalog ends c as a killed process would: the journal and bbolt
// files are left as they are, nothing is folded.
func crashCatalog(t *testing.T, c *catalog) {
	t.Helper()
	if err := c.jr.f.Close(); err != nil {
		t.Fatal(err)
	}
	if err := c.db.Close(); err != nil {
		t.Fatal(err)
	}
}

// queueChunk queues a segment record and the record of a chunk in it.
func queueChunk(c *catalog, seg uint32, slot int32, n uint64) {
	c.queue(catOp{kind: opSegmentPut, key: segKey(seg), val: encodeSegmentValue(4096, 16)})
	e := &entry{size: 100, crc: uint32(n)}
	e.key.id = testID(n)
	e.slot = slotRef{seg: &segment{id: seg}, slot: slot}
	c.addChunk("ns", e)
}

// flushChunk queues a chunk's records (queueChunk) and flushes them.
func flushChunk(t *testing.T, c *catalog, seg uint32, slot int32, n uint64) {
	t.Helper()
	queueChunk(c, seg, slot, n)
	if err := c.flush(); err != nil {
		t.Fatal(err)
	}
}

// loadedChunks returns the chunk ids load finds, by slot.
func loadedChunks(t *testing.T, c *catalog) map[int32]ID {
	t.Helper()
	_, chunks, bad, err := c.load()
	if err != nil || bad != 0 {
		t.Fatalf("load: %v (%d malformed)", err, bad)
	}
	out := map[int32]ID{}
	for _, r := range chunks {
		out[r.slot] = r.id
	}
	return out
}

func journalNames(t *testing.T, dir string) []string {
	t.Helper()
	paths, _, err := journalFiles(dir)
	if err != nil {
		t.Fatal(err)
	}
	return paths
}

func TestAFlushedChangeIsFoundAfterACrashFromTheJournal(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	c := openTestCatalog(t, dir, nil)
	queueChunk(c, 3, 1, 1)
	queueChunk(c, 3, 2, 2)
	c.queue(catOp{kind: opNamespacePut, name: "model-a", val: []byte("record")})
	if err := c.flush(); err != nil {
		t.Fatal(err)
	}
	if c.jr.size == 0 {
		t.Fatal("a flush wrote nothing to the journal")
	}
	crashCatalog(t, c)

	c = openTestCatalog(t, dir, nil)
	defer c.close()
	got := loadedChunks(t, c)
	if got[1] != testID(1) || got[2] != testID(2) || len(got) != 2 {
		t.Fatalf("after a crash the catalog holds %v, want the two flushed chunks", got)
	}
	if c.nextSegment != 4 {
		t.Fatalf("next segment id %d after the replay, want 4", c.nextSegment)
	}
	recs, err := c.namespaceRecords()
	if err != nil || string(recs["model-a"]) != "record" {
		t.Fatalf("namespace records after the replay: %v %q", err, recs)
	}
	if names := journalNames(t, dir); len(names) != 1 || names[0] != c.jr.f.Name() {
		t.Fatalf("journal files after the replay: %v, want only the new one", names)
	}
}

func TestATornJournalRecordKeepsTheChangesBeforeIt(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	c := openTestCatalog(t, dir, nil)
	flushChunk(t, c, 1, 1, 1)
	flushChunk(t, c, 1, 2, 2)
	path := c.jr.f.Name()
	crashCatalog(t, c)
	// Half of a third record: its length promises more than follows.
	var torn [12]byte
	binary.BigEndian.PutUint32(torn[:4], 500)
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_APPEND, 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.Write(torn[:]); err != nil {
		t.Fatal(err)
	}
	f.Close()

	var logs bytes.Buffer
	c = openTestCatalog(t, dir, slog.New(slog.NewTextHandler(&logs, nil)))
	defer c.close()
	if got := loadedChunks(t, c); len(got) != 2 {
		t.Fatalf("after a torn record the catalog holds %v, want the two whole records' chunks", got)
	}
	if !strings.Contains(logs.String(), "torn record") {
		t.Fatalf("no warning about the torn record; logs:\n%s", logs.String())
	}
}

func TestAFoldMovesTheJournalIntoBbolt(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	c := openTestCatalog(t, dir, nil)
	flushChunk(t, c, 2, 1, 1)
	if err := c.fold(); err != nil {
		t.Fatal(err)
	}
	if names := journalNames(t, dir); len(names) != 1 || names[0] != c.jr.f.Name() || c.jr.size != 0 {
		t.Fatalf("journal files after a fold: %v (current %d bytes), want one empty", names, c.jr.size)
	}
	crashCatalog(t, c)
	// bbolt alone has the change: remove every journal file.
	for _, p := range journalNames(t, dir) {
		if err := os.Remove(p); err != nil {
			t.Fatal(err)
		}
	}
	c = openTestCatalog(t, dir, nil)
	defer c.close()
	if got := loadedChunks(t, c); got[1] != testID(1) {
		t.Fatalf("after a fold bbolt holds %v", got)
	}
}

func TestAFailedFoldKeepsTheJournalAndItsChanges(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	c := openTestCatalog(t, dir, nil)
	flushChunk(t, c, 2, 1, 1)
	refused := errors.New("disk refuses writes")
	c.setWriteFault(refused)
	if err := c.fold(); !errors.Is(err, refused) {
		t.Fatalf("fold with bbolt refusing writes: %v", err)
	}
	c.setWriteFault(nil)
	flushChunk(t, c, 2, 2, 2)
	crashCatalog(t, c)
	c = openTestCatalog(t, dir, nil)
	defer c.close()
	if got := loadedChunks(t, c); len(got) != 2 {
		t.Fatalf("after a failed fold and a crash the catalog holds %v, want both chunks", got)
	}
}

// A crash after a fold wrote bbolt and before it removed the journal:
// replaying the journal over bbolt changes nothing.
func TestReplayingAFoldedJournalChangesNothing(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	c := openTestCatalog(t, dir, nil)
	queueChunk(c, 5, 1, 1)
	flushChunk(t, c, 5, 2, 2)
	c.queue(catOp{kind: opChunkDel, key: chunkKeyBytes(5, 1)})
	c.queue(catOp{kind: opSegmentPut, key: segKey(9), val: encodeSegmentValue(4096, 16)})
	c.queue(catOp{kind: opSegmentDel, key: segKey(9)})
	if err := c.flush(); err != nil {
		t.Fatal(err)
	}
	journal := c.jr.f.Name()
	saved, err := os.ReadFile(journal)
	if err != nil {
		t.Fatal(err)
	}
	if err := c.fold(); err != nil {
		t.Fatal(err)
	}
	crashCatalog(t, c)
	if err := os.WriteFile(journal, saved, 0o640); err != nil {
		t.Fatal(err)
	}
	c = openTestCatalog(t, dir, nil)
	defer c.close()
	got := loadedChunks(t, c)
	if len(got) != 1 || got[2] != testID(2) {
		t.Fatalf("after replaying a folded journal the catalog holds %v, want only chunk 2", got)
	}
	segs, _, _, err := c.load()
	if err != nil || len(segs) != 1 || segs[0].id != 5 || c.nextSegment != 10 {
		t.Fatalf("segments %v (%v), next id %d; want segment 5, next 10", segs, err, c.nextSegment)
	}
}

// A clean close folds the journal and leaves no journal file behind.
func TestACleanCloseLeavesNoJournal(t *testing.T) {
	t.Parallel()
	cfg := testConfig(t, 8<<20)
	s := openTest(t, cfg)
	mustPut(t, s, "ns", testID(1), payload(testID(1), 1000))
	if err := s.FlushCatalog(); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if names := journalNames(t, cfg.DataDir); len(names) != 0 {
		t.Fatalf("journal files after a clean close: %v", names)
	}
	s = openTest(t, cfg)
	readBack(t, s, "ns", testID(1), payload(testID(1), 1000))
}

func TestAJournalRecordDecodesAsItWasEncoded(t *testing.T) {
	t.Parallel()
	ops := []catOp{
		{kind: opSegmentPut, key: segKey(7), val: encodeSegmentValue(1<<20, 64)},
		{kind: opChunkDel, key: chunkKeyBytes(7, 3)},
		{kind: opSharePut, name: "model-b", val: []byte{1, 2, 3}},
		{kind: opNamespaceDel, name: "model-c"},
	}
	rec := encodeJournalRecord(nil, ops)
	payload, rest, err := nextJournalRecord(rec)
	if err != nil || len(rest) != 0 {
		t.Fatalf("record: %v, %d bytes left", err, len(rest))
	}
	got, err := decodeJournalOps(nil, payload)
	if err != nil || len(got) != len(ops) {
		t.Fatalf("decoded %d changes (%v), want %d", len(got), err, len(ops))
	}
	for i := range ops {
		if got[i].kind != ops[i].kind || got[i].key != ops[i].key || got[i].name != ops[i].name || !bytes.Equal(got[i].val, ops[i].val) {
			t.Fatalf("change %d decoded as %+v, was %+v", i, got[i], ops[i])
		}
	}
	rec[len(rec)-1] ^= 1
	if _, _, err := nextJournalRecord(rec); err == nil {
		t.Fatal("a record with a flipped bit passed its checksum")
	}
}

// FuzzJournalReplay: any bytes in a journal file are replayed up to the
// first bad record, never a panic or an allocation beyond the file's size.
func FuzzJournalReplay(f *testing.F) {
	f.Add(encodeJournalRecord(nil, []catOp{{kind: opChunkPut, key: chunkKeyBytes(1, 2), val: []byte("v")}}))
	f.Add([]byte{0, 0, 0, 5, 0, 0, 0, 0, 1})
	f.Fuzz(func(t *testing.T, data []byte) {
		path := filepath.Join(t.TempDir(), journalPrefix+"0000000000000001")
		if err := os.WriteFile(path, data, 0o640); err != nil {
			t.Fatal(err)
		}
		ops, err := readJournal(path)
		if err != nil && !errors.Is(err, errJournalTorn) {
			t.Fatal(err)
		}
		if len(ops) > len(data) {
			t.Fatalf("%d changes from %d bytes", len(ops), len(data))
		}
	})
}
