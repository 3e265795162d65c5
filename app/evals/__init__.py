"""`flask eval`: datasets of cases (evals/*.yaml, pydantic-evals' format) run through the
real host loop against the configured model, each run's transcript judged by
deterministic checks and rubric dimensions a model grades (docs/evals.md).

Above app.services (it drives runs through the app's own services), below app.cli. Nothing
here is imported when the app starts: pydantic-evals is an optional extra, and
`app.cli.evals` imports this package inside the command."""
