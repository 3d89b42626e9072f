"""One module per stage: provision -> configure -> validate -> collect -> report -> teardown."""
