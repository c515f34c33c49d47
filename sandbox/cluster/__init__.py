"""Sandboxes on a Docker Swarm: the primitives a swarm backend is built from.

- :mod:`sandbox.cluster.service_spec`: a sandbox as a one-replica service from the hardening
  table of ``docker run``, and what nodes must provide instead;
- :mod:`sandbox.cluster.networks`: the per-node internal bridge that keeps sandboxes on any two
  nodes apart;
- :mod:`sandbox.cluster.placement`: where a service's task landed and that node's engine (exec,
  archives), the node-side limits, removal;
- :mod:`sandbox.cluster.node_checks`: each node requirement checked on a running sandbox;
- :mod:`sandbox.cluster.capacity`: each node's room for sandboxes, as the scheduler sees it;
- :mod:`sandbox.cluster.node_images`: the nodes lacking kiln's images (or their build);
- :mod:`sandbox.cluster.image_distribution`: kiln's images copied onto every node lacking them;
- :mod:`sandbox.cluster.node_proxy`: the npm proxy on every node, each sandbox's only way out.

``docs/cluster.md`` describes the deployment these serve.
"""
