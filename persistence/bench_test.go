package persistence

import "testing"

// benchmarkAppend appends batches of size records of 64 bytes, one fsync each, and reports
// records/s: group commit should make it grow with the batch size.
func benchmarkAppend(b *testing.B, size int) {
	j, err := OpenFileJournal(b.TempDir(), FileOptions{})
	if err != nil {
		b.Fatal(err)
	}
	defer j.Close()
	batch := make([]Record, size)
	payload := make([]byte, 64)
	next := uint64(1)
	b.ReportAllocs()
	b.SetBytes(int64(size * (frameHeaderSize + len(payload))))
	for b.Loop() {
		for i := range batch {
			batch[i] = Record{LSN: next, Slot: next, Payload: payload}
			next++
		}
		if err := j.Append(batch); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(next-1)/b.Elapsed().Seconds(), "records/s")
	b.ReportMetric(float64(j.Stats().LastSync.Microseconds()), "last-fsync-µs")
}

func BenchmarkAppendBatch64(b *testing.B)        { benchmarkAppend(b, 64) }
func BenchmarkAppendPerRecordFsync(b *testing.B) { benchmarkAppend(b, 1) }
