"""Executors: where a cell's worker runs. base.py is the one contract every executor implements
(local.py: a process under supervisor.py; docker.py: a container made as containers.py says;
ray.py: the driver of a Ray cluster, whose tasks run one of those on their node: ray_node.py,
joined through ray_cluster.py, their messages typed in ray_messages.py); auto.py is the "auto" rule, kinds.py makes an executor of a kind.
Executors import nothing from results/ or scheduling."""
