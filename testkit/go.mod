module github.com/coordkit/coordkit/testkit

go 1.25
