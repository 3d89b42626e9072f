terraform {
  # terraform_data and local-exec are built in: this root downloads no provider.
  required_version = ">= 1.5"

  # State path is set at init (-backend-config=path=...): the env's state dir, never this folder.
  backend "local" {}
}
