variable "values" {
  description = "The env's fixed values (inventories/ENV/provision.yml), the user's values file and the driver's keys; terraform/modules/nebius-spec types and checks each."
  type        = any
}
