// The linearizability checker the tests run on recorded histories (see main.go, build.sh).
module etcd-supervisor/linearizability

go 1.21

require github.com/anishathalye/porcupine v1.3.1
