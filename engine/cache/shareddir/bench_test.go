package shareddir

import (
	"crypto/rand"
	"slices"
	"testing"
	"time"
)

// BenchmarkWriteClaimBase measures one publish + consume round trip of the
// base preset's encoder output: one F32 tensor of [576, 1024] (576 embedding
// rows x 1024 hidden, 2.25 MiB of data): Write (encode, temp file, fsync,
// rename, directory fsync) then Claim (open, rename, read, delete, decode).
// Reports the p50 and p99 round-trip latency in microseconds besides ns/op,
// and the p50 of each half (the fsyncs of Write dominate on a real disk).
func BenchmarkWriteClaimBase(b *testing.B) {
	const rows, cols = 576, 1024
	d, root := newProducer(b)
	tensors := tinyOutput(rows, cols, 0)
	md := map[string]string{"content_hash": "9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08"}
	const maxBytes = 4 << 20
	var lat, writeLat, claimLat []time.Duration
	var fileBytes int64
	for b.Loop() {
		id, err := NewEntryID(rand.Reader)
		if err != nil {
			b.Fatal(err)
		}
		start := time.Now()
		n, err := d.Write(id, tensors, md)
		if err != nil {
			b.Fatalf("Write = %v", err)
		}
		mid := time.Now()
		got, _, err := Claim(OSFS{}, root, testInstanceID, id, rand.Reader, maxBytes)
		if err != nil {
			b.Fatalf("Claim = %v", err)
		}
		end := time.Now()
		lat = append(lat, end.Sub(start))
		writeLat = append(writeLat, mid.Sub(start))
		claimLat = append(claimLat, end.Sub(mid))
		if len(got) != 1 || len(got[0].Data) != rows*cols*4 {
			b.Fatalf("Claim returned %d tensors", len(got))
		}
		fileBytes = n
	}
	b.SetBytes(fileBytes)
	pct := func(d []time.Duration, p float64) float64 {
		slices.Sort(d)
		return float64(d[int(p*float64(len(d)-1))].Microseconds())
	}
	b.ReportMetric(pct(lat, 0.50), "p50-us")
	b.ReportMetric(pct(lat, 0.99), "p99-us")
	b.ReportMetric(pct(writeLat, 0.50), "write-p50-us")
	b.ReportMetric(pct(claimLat, 0.50), "claim-p50-us")
}
