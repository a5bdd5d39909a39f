"""The one bridge between ORM rows and the pure core's types, both ways; nothing else imports both.

- `snapshot`: rows to the core's Snapshot, with typed info records (`WorkloadInfo`) for the
  rows its names stand for.
- `plan`: the core's decisions to a typed `Plan` of row changes, which the services apply.
- `preview`: what a scale would leave Not in Quota, for the quota pages.
- `room`: what a quota has free In Quota and idle to borrow now, for the submit form.
"""
