package idemhttp

import (
	"encoding/binary"
	"fmt"
	"net/http"

	"github.com/coordkit/coordkit/luakit"
)

// Stored response encoding (version 1), compact and binary-safe:
//
//	byte    'R' (magic), byte 1 (version)
//	uvarint status code (100..999)
//	uvarint number of header values n
//	n times: uvarint len, name bytes, uvarint len, value bytes
//	rest    body
//
// Names are stored canonicalised; repeated names carry their values in order.

const (
	recordMagic   = 'R'
	recordVersion = 1
)

// errMalformedRecord reports a stored response that does not decode: data this package did not
// write, so it matches luakit.ErrForeignData.
var errMalformedRecord = fmt.Errorf("idemhttp: stored response does not decode: %w", luakit.ErrForeignData)

// record is a response captured for replay.
type record struct {
	status int
	header http.Header
	body   []byte
}

func (r *record) encode() []byte {
	n := 0
	for _, vs := range r.header {
		n += len(vs)
	}
	size := 2 + 2*binary.MaxVarintLen64 + len(r.body)
	for k, vs := range r.header {
		for _, v := range vs {
			size += len(k) + len(v) + 2*binary.MaxVarintLen64
		}
	}
	b := make([]byte, 0, size)
	b = append(b, recordMagic, recordVersion)
	b = binary.AppendUvarint(b, uint64(r.status))
	b = binary.AppendUvarint(b, uint64(n))
	for k, vs := range r.header {
		for _, v := range vs {
			b = binary.AppendUvarint(b, uint64(len(k)))
			b = append(b, k...)
			b = binary.AppendUvarint(b, uint64(len(v)))
			b = append(b, v...)
		}
	}
	return append(b, r.body...)
}

// decodeRecord parses an encoded record. It never panics and never allocates more than O(len(b)).
func decodeRecord(b []byte) (*record, error) {
	if len(b) < 2 || b[0] != recordMagic || b[1] != recordVersion {
		return nil, errMalformedRecord
	}
	b = b[2:]
	status, b, ok := uvarint(b)
	if !ok || status < 100 || status > 999 {
		return nil, errMalformedRecord
	}
	n, b, ok := uvarint(b)
	// Each header value takes at least two bytes (two zero lengths).
	if !ok || n > uint64(len(b))/2 {
		return nil, errMalformedRecord
	}
	h := make(http.Header, min(n, 16))
	for i := uint64(0); i < n; i++ {
		var k, v []byte
		if k, b, ok = chunk(b); !ok {
			return nil, errMalformedRecord
		}
		if v, b, ok = chunk(b); !ok {
			return nil, errMalformedRecord
		}
		name := string(k)
		h[name] = append(h[name], string(v))
	}
	return &record{status: int(status), header: h, body: append([]byte{}, b...)}, nil
}

func uvarint(b []byte) (uint64, []byte, bool) {
	v, n := binary.Uvarint(b)
	if n <= 0 {
		return 0, nil, false
	}
	return v, b[n:], true
}

func chunk(b []byte) ([]byte, []byte, bool) {
	l, b, ok := uvarint(b)
	if !ok || l > uint64(len(b)) {
		return nil, nil, false
	}
	return b[:l], b[l:], true
}
