package testkit

import "go.uber.org/goleak"

// GoleakOptions returns goleak options that ignore goroutines rueidis leaves behind on purpose
// after Close: a cluster client's topology refresh closes replaced connections from a detached
// goroutine after a 5s sleep, and a refresh triggered by an error (a killed node, MOVED) is
// delayed by a detached goroutine that sleeps up to 1s. Use it in TestMain of packages that make
// cluster clients:
//
//	func TestMain(m *testing.M) { goleak.VerifyTestMain(m, testkit.GoleakOptions()...) }
func GoleakOptions(extra ...goleak.Option) []goleak.Option {
	return append([]goleak.Option{
		goleak.IgnoreAnyFunction("github.com/redis/rueidis.(*clusterClient)._refresh.func2"),
		goleak.IgnoreAnyFunction("github.com/redis/rueidis.(*call).DelayDo.func1"),
	}, extra...)
}
