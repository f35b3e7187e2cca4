module github.com/coordkit/coordkit/lock

go 1.25
