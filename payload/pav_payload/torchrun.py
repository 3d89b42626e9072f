"""``python -m pav_payload.torchrun ARGS``: torchrun (torch.distributed.run, the `torchrun` script's own
main) started through the payload, so that its torch import comes after the payload's warning filter
(pav_payload/__init__.py): the launcher's lines in launcher.log are as quiet as its ranks'."""

from torch.distributed.run import main

if __name__ == "__main__":
    main()
