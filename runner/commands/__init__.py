"""One module per subcommand (asv's commands/): each has `add_arguments(parser)` and
`main(args, console) -> int`, and imports what it runs only inside main (cheap start-up).
runner/cli.py is the table of them and the one error path around them."""
