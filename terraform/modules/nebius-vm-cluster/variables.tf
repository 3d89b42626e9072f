variable "values" {
  description = "The env's, the user's and the driver's values; terraform/modules/nebius-spec types, defaults and checks every key."
  type        = any
}
