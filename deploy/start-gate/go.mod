module etcd-supervisor/start-gate

go 1.22
