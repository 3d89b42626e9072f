"""The Kubernetes path (--platform k8s): the validation runs as PyTorchJob and MPIJob on a cluster."""
