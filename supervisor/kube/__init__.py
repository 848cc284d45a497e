"""The Kubernetes adapter (the only importer of kubernetes_asyncio).

- client.py: the API client (typed errors, paging, watches) over kubernetes-asyncio;
- runtime.py: actors.ports.MemberRuntime over pods and volume claims; manifests.py builds them,
  tls.py the cluster's certificate Secret;
- status.py: the status subresource and core/v1 Events (StatusSink, EventSink);
- watch.py, leader.py: resilient watches, Lease leader election;
- metrics.py: the operator's own metrics (leadership, watches, status writes), read at scrape time;
- operator.py assembles those with the HTTP endpoints of supervisor.metrics (/healthz, /readyz,
  /metrics); clusters.py feeds EtcdCluster events to the fleet.
"""
