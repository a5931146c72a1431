package collectors

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/kvring/kvring/store/disk"
)

// diskCollector exports the disk tier's accounting from one disk.Stats
// snapshot per scrape (kvring_disk_*). Safe for concurrent use; a scrape
// takes the tier's lock briefly and stats its directory.
type diskCollector struct {
	t *disk.Tier

	limit, used, regions, chunks, payload, queuedChunks, queuedBytes *prometheus.Desc
	offloads, already, drops, writeBytes, reads, hits, readBytes     *prometheus.Desc
	checksumErrors, readErrors, regionsEvicted, chunksEvicted        *prometheus.Desc
	healthy                                                          *prometheus.Desc
}

func newDiskCollector(t *disk.Tier) *diskCollector {
	d := func(name, help string, labels ...string) *prometheus.Desc {
		return prometheus.NewDesc("kvring_disk_"+name, help, labels, nil)
	}
	return &diskCollector{
		t:              t,
		limit:          d("limit_bytes", "The disk tier's byte limit (--disk-limit)."),
		used:           d("used_bytes", "Bytes of the disk tier's region files."),
		regions:        d("regions", "Region files of the disk tier."),
		chunks:         d("chunks", "Chunks held on disk."),
		payload:        d("payload_bytes", "Payload bytes of the chunks held on disk."),
		queuedChunks:   d("queued_chunks", "Evicted chunks copied out of shared memory, waiting for the disk (held)."),
		queuedBytes:    d("queued_bytes", "Bytes waiting for the disk; offloads beyond --disk-queue are dropped."),
		offloads:       d("offloads_total", "Evicted chunks written to disk."),
		already:        d("offloads_already_held_total", "Evicted chunks the disk tier held already (nothing written)."),
		drops:          d("offload_drops_total", "Evicted chunks not written to disk, by reason.", "reason"),
		writeBytes:     d("write_bytes_total", "Bytes written to region files (records)."),
		reads:          d("reads_total", "Reads of the disk tier."),
		hits:           d("hits_total", "Reads of the disk tier that returned verified bytes."),
		readBytes:      d("read_bytes_total", "Bytes read from region files."),
		checksumErrors: d("checksum_errors_total", "Records that failed their checksum when read (a miss; the chunk dropped)."),
		readErrors:     d("read_errors_total", "Reads that failed (I/O error, truncated file; a miss, the chunk dropped)."),
		regionsEvicted: d("regions_evicted_total", "Regions evicted to make room (oldest first)."),
		chunksEvicted:  d("chunks_evicted_total", "Chunks that left the disk tier with their region."),
		healthy:        d("healthy", "1 while the disk tier offloads, 0 while it is degraded (full disk, I/O error, directory gone)."),
	}
}

var dropReasons = []string{disk.DropQueueFull, disk.DropDegraded, disk.DropTooLarge, disk.DropUnreadable, disk.DropIOError, disk.DropPinned}

func (c *diskCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{c.limit, c.used, c.regions, c.chunks, c.payload, c.queuedChunks, c.queuedBytes,
		c.offloads, c.already, c.drops, c.writeBytes, c.reads, c.hits, c.readBytes, c.checksumErrors, c.readErrors,
		c.regionsEvicted, c.chunksEvicted, c.healthy} {
		ch <- d
	}
}

func (c *diskCollector) Collect(ch chan<- prometheus.Metric) {
	healthy := int64(1)
	if c.t.Health() != nil {
		healthy = 0
	}
	s := c.t.Stats()
	gauge := func(d *prometheus.Desc, v int64) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.GaugeValue, float64(v))
	}
	counter := func(d *prometheus.Desc, v uint64, labels ...string) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.CounterValue, float64(v), labels...)
	}
	gauge(c.limit, s.LimitBytes)
	gauge(c.used, s.UsedBytes)
	gauge(c.regions, int64(s.Regions))
	gauge(c.chunks, s.Chunks)
	gauge(c.payload, s.PayloadBytes)
	gauge(c.queuedChunks, s.QueuedChunks)
	gauge(c.queuedBytes, s.QueuedBytes)
	counter(c.offloads, s.Offloads)
	counter(c.already, s.AlreadyHeld)
	for _, r := range reasonsOf(dropReasons, s.Drops) {
		counter(c.drops, s.Drops[r], r)
	}
	counter(c.writeBytes, uint64(s.WriteBytes))
	counter(c.reads, s.Reads)
	counter(c.hits, s.Hits)
	counter(c.readBytes, uint64(s.ReadBytes))
	counter(c.checksumErrors, s.ChecksumErrors)
	counter(c.readErrors, s.ReadErrors)
	counter(c.regionsEvicted, s.RegionsEvicted)
	counter(c.chunksEvicted, s.ChunksEvicted)
	gauge(c.healthy, healthy)
}

// Disk is the disk tier's collector, none when it is off (t nil).
func Disk(t *disk.Tier) []prometheus.Collector {
	if t == nil {
		return nil
	}
	return []prometheus.Collector{newDiskCollector(t)}
}
