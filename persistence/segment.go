package persistence

import (
	"cmp"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
)

const (
	segmentSuffix    = ".journal"
	segmentNameWidth = 20 // digits of the largest uint64, so names sort like their lsns
)

// segment is one journal file. Its name is the lsn of its first record, which lets Replay and
// Compact pick files without opening them.
type segment struct {
	path  string
	first uint64 // lsn in the file name
	last  uint64 // lsn of the last durable record; first-1 while the file holds none
	size  int64  // bytes that are durable; anything after this is never read
	// length is the file's length: size, plus the zeros written ahead of the next batch
	// (fillAhead) in the segment being written.
	length int64
}

func segmentName(first uint64) string {
	return fmt.Sprintf("%0*d%s", segmentNameWidth, first, segmentSuffix)
}

// parseSegmentName returns the first lsn encoded in a segment file name. Other files (snapshots,
// temporary files) may share the directory and are ignored.
func parseSegmentName(name string) (uint64, bool) {
	digits, ok := strings.CutSuffix(name, segmentSuffix)
	if !ok || len(digits) != segmentNameWidth {
		return 0, false
	}
	lsn, err := strconv.ParseUint(digits, 10, 64)
	return lsn, err == nil
}

// listSegments returns dir's segment files, oldest first, with only path and first filled in.
func listSegments(dir string) ([]segment, error) {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil, err
	}
	var segs []segment
	for _, e := range entries {
		first, ok := parseSegmentName(e.Name())
		if !ok || !e.Type().IsRegular() {
			continue
		}
		segs = append(segs, segment{path: filepath.Join(dir, e.Name()), first: first})
	}
	slices.SortFunc(segs, func(a, b segment) int {
		return cmp.Compare(a.first, b.first)
	})
	return segs, nil
}

// syncDir makes file creations, renames and removals in dir durable: fsyncing a file does not
// persist its directory entry.
func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	if err := d.Sync(); err != nil {
		d.Close()
		return err
	}
	return d.Close()
}
