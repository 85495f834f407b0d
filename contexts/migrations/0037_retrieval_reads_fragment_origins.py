"""Where a returned fragment that no file brought was written (issue 40, item 4): retrieval
answers ``source.kind`` — ``console``, ``session`` or ``proposal`` — with who wrote it and when,
read in the statement that reads the returned fragments (``contexts/retrieval/returned.py``).

So the retrieval role gets the columns that takes and no text: a version's fragment, number,
editor and time (not its title, body or metadata), an approved proposal's public id, the fragment
it became and when it was decided (not its title, body or reason), and a person's id and username.
Versions and proposals are visible exactly with the fragment they name, as source pointers and
pins are (0013); the application role sees every row (``application_rows``, as in 0019). People
span organizations (``auth_user`` is a reference table): only the username is granted.
"""

from django.db import migrations

from contexts.stack.db_roles import APPLICATION_GROUP

ROLE = "contexts_retrieval"
APP = APPLICATION_GROUP

GUARDED = {
    "contexts_fragmentversion": ("org_id, fragment_id, number, editor_id, created_at",
                                 "contexts_fragment_readable(fragment_id)"),
    "contexts_proposal": ("public_id, result_fragment_id, decided_at",
                          "result_fragment_id IS NOT NULL "
                          "AND contexts_fragment_readable(result_fragment_id)"),
}

FORWARD = "".join(
    f"GRANT SELECT ({columns}) ON {table} TO {ROLE};\n"
    f"ALTER TABLE {table} ENABLE ROW LEVEL SECURITY;\n"
    f"CREATE POLICY retrieval_scopes ON {table} FOR SELECT TO {ROLE} USING ({using});\n"
    f"CREATE POLICY application_rows ON {table} FOR ALL TO {APP} USING (true) WITH CHECK (true);\n"
    for table, (columns, using) in GUARDED.items()
) + f"GRANT SELECT (id, username) ON auth_user TO {ROLE};\n"

BACKWARD = f"REVOKE ALL ON auth_user FROM {ROLE};\n" + "".join(
    f"DROP POLICY IF EXISTS application_rows ON {table};\n"
    f"DROP POLICY IF EXISTS retrieval_scopes ON {table};\n"
    f"ALTER TABLE {table} DISABLE ROW LEVEL SECURITY;\n"
    f"REVOKE ALL ON {table} FROM {ROLE};\n"
    for table in GUARDED
)


class Migration(migrations.Migration):
    dependencies = [("contexts", "0036_nudge_public_id")]

    operations = [migrations.RunSQL(FORWARD, reverse_sql=BACKWARD)]
