"""The site over a build: the HTML report and the explorer (its pages, their data and the
build-to-build diff they show)."""
