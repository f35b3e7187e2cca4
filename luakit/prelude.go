package luakit

import (
	_ "embed"
	"fmt"
	"strings"
)

// Prelude is the Lua source of the functions every Coordkit script shares instead of copying them:
// the server time in milliseconds and microseconds (luakit_now_ms, luakit_now_us), the canonical
// int64 check and exact int64 parts (luakit_int64, luakit_int64_split), the key-type check
// (luakit_type: ok, absent or foreign), the owner check and the owner-checked delete (luakit_owner, luakit_del_owned), and the fence counter's read check and
// token issue with every guard (luakit_fence_read, luakit_fence_next). [WithPrelude] and [MustLoad]
// put in front of a script the functions it calls: a script defines only what it uses, so the prelude
// costs a script nothing it does not use.
//
//go:embed prelude.lua
var Prelude string

// preludeFuncs is [Prelude] cut into its functions.
var preludeFuncs = mustParseFuncs("prelude.lua", Prelude)

// WithPrelude returns source with the [Prelude] functions it calls (and those they call) inserted
// after its leading comment lines, in the prelude's order; source that calls none is returned
// unchanged. [MustLoad] applies it; call it when building a script from a string.
func WithPrelude(source string) string {
	defs := preludeFor(source, nil)
	if defs == "" {
		return source
	}
	i := headerEnd(source)
	return source[:i] + defs + source[i:]
}

// luaFunc is one top-level "local function name(...) ... end" of a prelude file, with the comment
// lines before it.
type luaFunc struct {
	name string
	text string
	uses map[string]bool // the names its code mentions
}

// parseFuncs cuts src (a prelude file) into its functions: each starts at a line "local function
// <name>(" (with the comment lines just before it) and ends at the next line "end". It reports an
// error for a function that does not end.
func parseFuncs(file, src string) ([]luaFunc, error) {
	var funcs []luaFunc
	lines := strings.SplitAfter(src, "\n")
	start := -1 // first comment line of the block being read
	for i := 0; i < len(lines); i++ {
		line := strings.TrimRight(lines[i], "\r\n")
		switch {
		case strings.HasPrefix(line, "--"):
			if start < 0 {
				start = i
			}
		case strings.HasPrefix(line, "local function "):
			name, _, ok := strings.Cut(strings.TrimPrefix(line, "local function "), "(")
			if !ok || name == "" {
				return nil, fmt.Errorf("luakit: %s: malformed function line %q", file, line)
			}
			if start < 0 {
				start = i
			}
			j := i + 1
			for j < len(lines) && strings.TrimRight(lines[j], "\r\n") != "end" {
				j++
			}
			if j == len(lines) {
				return nil, fmt.Errorf("luakit: %s: function %s has no closing line \"end\"", file, name)
			}
			text := strings.Join(lines[start:j+1], "")
			if !strings.HasSuffix(text, "\n") {
				text += "\n"
			}
			body := strings.Join(lines[i:j+1], "")
			funcs = append(funcs, luaFunc{name: strings.TrimSpace(name), text: text, uses: luaNames(body)})
			i, start = j, -1
		default:
			start = -1
		}
	}
	return funcs, nil
}

// mustParseFuncs is parseFuncs for package initialisation.
func mustParseFuncs(file, src string) []luaFunc {
	f, err := parseFuncs(file, src)
	if err != nil {
		panic(err.Error())
	}
	return f
}

// preludeFor returns the definitions source needs: the functions of [Prelude], then of local (a
// module's own prelude), that source's code calls, with the functions they call, each list in its
// file's order (a function calls only functions defined before it).
func preludeFor(source string, local []luaFunc) string {
	need := luaNames(source)
	all := append(append([]luaFunc(nil), preludeFuncs...), local...)
	// Close over the calls, from the last function to the first: a function only calls earlier ones.
	for k := len(all) - 1; k >= 0; k-- {
		if need[all[k].name] {
			for n := range all[k].uses {
				need[n] = true
			}
		}
	}
	var b strings.Builder
	for _, f := range all {
		if need[f.name] {
			b.WriteString(f.text)
		}
	}
	return b.String()
}

// luaNames returns the set of Lua names in src outside comments and quoted strings.
func luaNames(src string) map[string]bool {
	names := map[string]bool{}
	for i := 0; i < len(src); {
		switch c := src[i]; {
		case c == '\'' || c == '"':
			i = skipLuaString(src, i)
		case c == '-' && strings.HasPrefix(src[i:], "--"):
			if j := strings.IndexByte(src[i:], '\n'); j >= 0 {
				i += j
			} else {
				i = len(src)
			}
		case c == '_' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z':
			j := i + 1
			for j < len(src) && (src[j] == '_' || src[j] >= '0' && src[j] <= '9' || src[j] >= 'a' && src[j] <= 'z' || src[j] >= 'A' && src[j] <= 'Z') {
				j++
			}
			names[src[i:j]] = true
			i = j
		default:
			i++
		}
	}
	return names
}

// headerEnd returns the index just after source's leading comment (and blank) lines.
func headerEnd(source string) int {
	i := 0
	for i < len(source) {
		end := strings.IndexByte(source[i:], '\n')
		if end < 0 {
			break
		}
		line := strings.TrimSpace(source[i : i+end])
		if line != "" && !strings.HasPrefix(line, "--") {
			break
		}
		i += end + 1
	}
	return i
}
