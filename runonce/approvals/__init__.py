"""Where people approve held actions: the client (``client``) the CLI (``runonce approvals``)
and the page (``page``) share. Verdicts are records; the stream job decides them
(streams/holds.py, core/approval.py)."""
