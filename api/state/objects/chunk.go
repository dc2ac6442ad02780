package objects

import (
	"fmt"
	"io"

	"github.com/klauspost/compress/zstd"
	"github.com/restic/chunker"

	"github.com/cocoonbox/cocoonbox/api/seal"
)

// A chunk's sealed plain text is one format byte and the body: chunkRaw,
// the data as it is, or chunkZstd, one zstd frame of it (kept only when it
// is smaller: most of a home is already compressed).
const (
	chunkRaw  = 0
	chunkZstd = 1
)

// MinChunk, MaxChunk bound a chunk's size (restic's chunker's defaults;
// the average is 1 MiB).
const (
	MinChunk = chunker.MinSize
	MaxChunk = chunker.MaxSize
)

// The codecs are safe for concurrent EncodeAll and DecodeAll; one each
// serves every user.
var (
	zenc, _ = zstd.NewWriter(nil, zstd.WithEncoderLevel(zstd.SpeedDefault), zstd.WithEncoderConcurrency(1))
	zdec, _ = zstd.NewReader(nil, zstd.WithDecoderConcurrency(0), zstd.WithDecoderMaxMemory(MaxChunk+1))
)

// SealChunk is the sealed object of the chunk plain (at most MaxChunk
// bytes) and its id (ChunkID): additional data state|<uid>|chunk|<id>.
func (k *Keys) SealChunk(plain []byte) (id string, sealed []byte) {
	id = k.ChunkID(plain)
	body := make([]byte, 1, len(plain)/2+1)
	body = zenc.EncodeAll(plain, body)
	if len(body) >= 1+len(plain) {
		body = append(append(body[:0], chunkRaw), plain...)
	} else {
		body[0] = chunkZstd
	}
	return id, seal.SealWith(k.chunk, k.aad("chunk", id), body)
}

// OpenChunk opens the sealed chunk id and checks that its content is the
// one id names; anything else is ErrCorrupt, naming the chunk.
func (k *Keys) OpenChunk(id string, sealed []byte) ([]byte, error) {
	if !chunkIDRule.MatchString(id) {
		return nil, fmt.Errorf("chunk %q: not 64 hex digits: %w", id, ErrCorrupt)
	}
	body, err := seal.OpenWith(k.chunk, k.aad("chunk", id), sealed)
	if err != nil || len(body) == 0 {
		return nil, fmt.Errorf("chunk %s: %w", id, ErrCorrupt)
	}
	var plain []byte
	switch body[0] {
	case chunkRaw:
		plain = body[1:]
	case chunkZstd:
		if plain, err = zdec.DecodeAll(body[1:], nil); err != nil {
			return nil, fmt.Errorf("chunk %s: %v: %w", id, err, ErrCorrupt)
		}
	default:
		return nil, fmt.Errorf("chunk %s: format %d: %w", id, body[0], ErrCorrupt)
	}
	if k.ChunkID(plain) != id {
		return nil, fmt.Errorf("chunk %s: content of another id: %w", id, ErrCorrupt)
	}
	return plain, nil
}

// Chunker cuts r into content-defined chunks with the user's polynomial:
// an insertion in a file moves the boundaries near it only, so a file
// changed a little shares most of its chunks with what it was.
type Chunker struct {
	c   *chunker.Chunker
	buf []byte
}

// NewChunker is a Chunker of r; reuse it with Reset.
func (k *Keys) NewChunker(r io.Reader) *Chunker {
	return &Chunker{c: chunker.New(r, k.pol), buf: make([]byte, MaxChunk)}
}

// Reset points the chunker at another r, keeping its buffer.
func (c *Chunker) Reset(k *Keys, r io.Reader) { c.c.Reset(r, k.pol) }

// Next is the next chunk (valid until the next call), or io.EOF.
func (c *Chunker) Next() ([]byte, error) {
	ch, err := c.c.Next(c.buf)
	if err != nil {
		return nil, err
	}
	return ch.Data, nil
}
