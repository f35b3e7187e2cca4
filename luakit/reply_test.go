package luakit

import (
	"testing"

	"github.com/redis/rueidis"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestReplyStatus: a status alone and a status row decode to the same status; other shapes and
// statuses outside the table are errors.
func TestReplyStatus(t *testing.T) {
	t.Parallel()
	st, rest, err := ReplyStatus(msg(t, ':', "", StatusNotOwner))
	require.NoError(t, err)
	assert.Equal(t, StatusNotOwner, st)
	assert.Nil(t, rest)

	row := arrayMsg(t, int(StatusCounter), "negative")
	st, rest, err = ReplyStatus(row)
	require.NoError(t, err)
	assert.Equal(t, StatusCounter, st)
	require.Len(t, rest, 1)
	reason, _ := rest[0].ToString()
	assert.Equal(t, "negative", reason)

	for name, m := range map[string]rueidis.RedisMessage{
		"unknown status":          msg(t, ':', "", 2),
		"below the table":         msg(t, ':', "", -8),
		"bare string":             str(t, "1"),
		"empty row":               arrayMsg(t),
		"row led by a string":     arrayMsg(t, "1"),
		"row with unknown status": arrayMsg(t, 7),
	} {
		if _, _, err := ReplyStatus(m); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
}
