package pipeline

import (
	"archive/tar"
	"bytes"
	"sort"

	katastromav1 "github.com/quartet-dev/quartet-operator/internal/gitops/gen/katastroma/v1"
)

// ChunkSize is the size of the tar chunks streamed to the renderer (32 KiB).
const ChunkSize = 32 << 10

// TarFiles builds a tar of files (relative slash paths), in name order.
func TarFiles(files map[string][]byte) ([]byte, error) {
	names := make([]string, 0, len(files))
	for n := range files {
		names = append(names, n)
	}
	sort.Strings(names)
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	for _, n := range names {
		if err := tw.WriteHeader(&tar.Header{Name: n, Mode: 0o644, Size: int64(len(files[n])),
			Typeflag: tar.TypeReg}); err != nil {
			return nil, err
		}
		if _, err := tw.Write(files[n]); err != nil {
			return nil, err
		}
	}
	if err := tw.Close(); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

// Chunks splits b into ChunkSize messages.
func Chunks(b []byte) []*katastromav1.Chunk {
	var out []*katastromav1.Chunk
	for len(b) > 0 {
		n := min(len(b), ChunkSize)
		out = append(out, &katastromav1.Chunk{Data: b[:n]})
		b = b[n:]
	}
	return out
}
