module github.com/coordkit/coordkit/tools

go 1.25
