terraform {
  # Optional object attributes with defaults need 1.3; plantimestamp() (the expiry label) needs 1.5.
  required_version = ">= 1.5"
}
