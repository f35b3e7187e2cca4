package luakit

import (
	"crypto/rand"
	"encoding/hex"
	"fmt"
)

// NewOwnerToken returns a fresh owner token: 128 bits from crypto/rand as
// 32 lowercase hexadecimal characters. A token proves ownership of a lease,
// lock or claim, so treat it as a secret: never log it, never put it in an
// error message, and never use it as a metric attribute.
//
// The error is always nil (see [OwnerToken], which has no error to check).
// Safe for concurrent use.
func NewOwnerToken() (string, error) {
	var b [16]byte
	if _, err := rand.Read(b[:]); err != nil {
		return "", fmt.Errorf("luakit: owner token: %w", err)
	}
	return hex.EncodeToString(b[:]), nil
}
