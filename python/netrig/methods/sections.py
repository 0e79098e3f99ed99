"""Report sections and CLI commands that several methods share."""
from netrig.methodology.method import Command, Section

#: The methods with a table each and no plot of their own in single-run reports.
OTHER_METHODS = Section("other-methods", "Back-to-back, system recovery, reset, fixed rate",
                        compare_title="Fixed rate (iperf-like)", shown_when_empty=True)

#: ``netrig rfc2544``: the RFC 2544 methods, chosen with ``--tests``.
RFC2544 = Command("rfc2544", "RFC 2544 throughput/latency/frame loss/back-to-back on a test bed",
                  "RFC 2544 tests (sections 26.1–26.6) on a test bed.")
