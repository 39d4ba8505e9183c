package backup

import (
	"bufio"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"os"
	"time"

	"github.com/holdfast/holdfast/persistence"
)

// A copy file: the magic line, a JSON header (its length first, 4 bytes big-endian),
// every shard's state in shard order (the kernel's snapshot encoding, as a data
// directory keeps it), and a CRC-32C of everything before it (4 bytes big-endian). Each
// part has its own CRC in the header too, so a damaged file names the part.

// Magic starts every copy file.
const Magic = "HOLDFAST COPY\n"

// Format is the copy file format this build writes and reads.
const Format = 1

// maxHeader bounds a header's length (a header of 4,096 shards is about 400 KiB).
const maxHeader = 8 << 20

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// Header is what a copy says about itself: `holdfast snapshot status` prints it.
type Header struct {
	Format  int       `json:"format"`
	Taken   time.Time `json:"taken"`
	Version string    `json:"version"` // the build that took it
	Prefix  string    `json:"prefix"`
	Shards  uint32    `json:"shards"`
	SlotMs  uint64    `json:"slot_ms"`
	Parts   []Part    `json:"parts"`
}

// Part is one shard's state in a copy.
type Part struct {
	Shard uint32 `json:"shard"`
	LSN   uint64 `json:"lsn"`
	Slot  uint64 `json:"slot"`
	Size  int64  `json:"size"`
	CRC   uint32 `json:"crc32c"`
}

// Copy is a copy in memory: its header and each shard's state.
type Copy struct {
	Header
	States [][]byte // by shard
}

// check says what is wrong with a header for this build ("" when nothing).
func (h *Header) check() error {
	switch {
	case h.Format > Format:
		return fmt.Errorf("copy format %d, and this build reads format %d: the copy was taken by a newer Holdfast", h.Format, Format)
	case h.Format < 1:
		return fmt.Errorf("copy format %d is not one", h.Format)
	case h.Shards == 0 || int(h.Shards) != len(h.Parts):
		return fmt.Errorf("the header names %d shards and %d parts", h.Shards, len(h.Parts))
	case h.SlotMs == 0:
		return errors.New("the header names no slot length")
	}
	for i, p := range h.Parts {
		if p.Shard != uint32(i) || p.Size < 0 {
			return fmt.Errorf("part %d: names shard %d, size %d", i, p.Shard, p.Size)
		}
	}
	return nil
}

// WriteFile writes c to path durably: a temporary file beside it, fsync, rename, fsync
// of the directory. A half-written copy is never found under path.
func WriteFile(path string, c *Copy) error {
	return persistence.WriteFile(path, func(f *os.File) error {
		w := bufio.NewWriterSize(f, 1<<20)
		if err := Write(w, c); err != nil {
			return err
		}
		return w.Flush()
	})
}

// Write writes c in the copy format, its CRCs computed here.
func Write(w io.Writer, c *Copy) error {
	h := c.Header
	h.Format = Format
	h.Parts = make([]Part, len(c.States))
	copy(h.Parts, c.Parts)
	for i, st := range c.States {
		h.Parts[i].Shard, h.Parts[i].Size, h.Parts[i].CRC = uint32(i), int64(len(st)), crc32.Checksum(st, castagnoli)
	}
	if err := h.check(); err != nil {
		return err
	}
	head, err := json.Marshal(&h)
	if err != nil {
		return err
	}
	sum := crc32.New(castagnoli)
	out := io.MultiWriter(w, sum)
	var n [4]byte
	binary.BigEndian.PutUint32(n[:], uint32(len(head)))
	for _, b := range [][]byte{[]byte(Magic), n[:], head} {
		if _, err := out.Write(b); err != nil {
			return err
		}
	}
	for _, st := range c.States {
		if _, err := out.Write(st); err != nil {
			return err
		}
	}
	binary.BigEndian.PutUint32(n[:], sum.Sum32())
	_, err = w.Write(n[:])
	return err
}

// ReadFile reads and checks the copy at path.
func ReadFile(path string) (*Copy, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	c, err := Read(bufio.NewReaderSize(f, 1<<20))
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return c, nil
}

// Read reads a copy and checks it whole: the magic, the header, each part's CRC and the
// file's. A copy of a newer format is refused, naming both formats.
func Read(r io.Reader) (*Copy, error) {
	sum := crc32.New(castagnoli)
	in := io.TeeReader(r, sum)
	magic := make([]byte, len(Magic))
	if _, err := io.ReadFull(in, magic); err != nil || string(magic) != Magic {
		return nil, errors.New("not a Holdfast copy (no magic line)")
	}
	var n [4]byte
	if _, err := io.ReadFull(in, n[:]); err != nil {
		return nil, fmt.Errorf("reading the header's length: %w", err)
	}
	size := binary.BigEndian.Uint32(n[:])
	if size > maxHeader {
		return nil, fmt.Errorf("a header of %d bytes is past the bound %d", size, maxHeader)
	}
	head := make([]byte, size)
	if _, err := io.ReadFull(in, head); err != nil {
		return nil, fmt.Errorf("reading the header: %w", err)
	}
	c := &Copy{}
	if err := json.Unmarshal(head, &c.Header); err != nil {
		return nil, fmt.Errorf("the header: %w", err)
	}
	if err := c.check(); err != nil {
		return nil, err
	}
	for _, p := range c.Parts {
		st, err := readPart(in, p)
		if err != nil {
			return nil, err
		}
		c.States = append(c.States, st)
	}
	want := sum.Sum32()
	if _, err := io.ReadFull(r, n[:]); err != nil {
		return nil, fmt.Errorf("reading the file's checksum: %w", err)
	}
	if got := binary.BigEndian.Uint32(n[:]); got != want {
		return nil, fmt.Errorf("the file's checksum is %08x, its contents sum to %08x: damaged", got, want)
	}
	return c, nil
}

// readPart reads part p, checking its CRC.
func readPart(in io.Reader, p Part) ([]byte, error) {
	st := make([]byte, 0, min(p.Size, 1<<20)) // grown as read: a damaged size allocates nothing up front
	buf := make([]byte, 1<<20)
	for left := p.Size; left > 0; {
		m, err := io.ReadFull(in, buf[:min(left, int64(len(buf)))])
		st = append(st, buf[:m]...)
		if err != nil {
			return nil, fmt.Errorf("shard %d's part: %w", p.Shard, err)
		}
		left -= int64(m)
	}
	if got := crc32.Checksum(st, castagnoli); got != p.CRC {
		return nil, fmt.Errorf("shard %d's part sums to %08x, its header says %08x: damaged", p.Shard, got, p.CRC)
	}
	return st, nil
}
