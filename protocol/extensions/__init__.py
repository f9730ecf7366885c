"""The pure side of approvals, questions, live controls, hooks, custom tools, skills and the path
scope."""
