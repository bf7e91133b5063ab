"""`autograder staff`: instructors' and assistants' tokens for the live view (staff.py).

    autograder staff add NAME [--role instructor|assistant]   prints the new token once (stdout)
    autograder staff list                                     who has one, revoked or not
    autograder staff revoke NAME                              the token and its sessions end now

The store is found as `serve` finds it: --database-url, else --data's SQLite file (each also from
$AUTOGRADER_SERVE_DATABASE_URL / $AUTOGRADER_SERVE_DATA, as `serve` reads them), else ./servicio.
"""

from __future__ import annotations

from pathlib import Path


def add_parser(sub) -> None:
    from autograder.core.results import message
    from autograder.service.config import add_store_options

    parser = sub.add_parser(
        "staff", help=message("service.staff.help"), description=message("service.staff.help")
    )
    add_store_options(
        parser,
        data_help=message("service.staff.opt_data"),
        database_url_help=message("service.staff.opt_database_url"),
    )
    actions = parser.add_subparsers(
        dest="staff_action", metavar="{add,list,revoke}", help=message("service.staff.action_help")
    )
    actions.required = True
    add = actions.add_parser(
        "add", help=message("service.staff.add_help"), description=message("service.staff.add_help")
    )
    add.add_argument(
        "name", metavar=message("service.staff.metavar_name"), help=message("service.staff.opt_name")
    )
    add.add_argument(
        "--role",
        choices=("instructor", "assistant"),
        default="instructor",
        help=message("service.staff.opt_role"),
    )
    actions.add_parser(
        "list", help=message("service.staff.list_help"), description=message("service.staff.list_help")
    )
    revoke = actions.add_parser(
        "revoke", help=message("service.staff.revoke_help"), description=message("service.staff.revoke_help")
    )
    revoke.add_argument(
        "name", metavar=message("service.staff.metavar_name"), help=message("service.staff.opt_name")
    )


def main(course, args) -> int:
    from sqlalchemy.exc import SQLAlchemyError

    from autograder.cohort.outputs import Say
    from autograder.service.config import store_url
    from autograder.service.staff import Staff, StaffError
    from autograder.service.store import Store

    say = Say(args.lang or course.language)
    url = store_url(args)
    if url.startswith("sqlite:///"):
        Path(url.removeprefix("sqlite:///")).parent.mkdir(parents=True, exist_ok=True)
    try:
        store = Store(url)
    except (SQLAlchemyError, ValueError, ImportError) as exc:
        say.line("service.serve.database_failed", url=url, detail=str(exc)[:300])
        return 2
    try:
        store.create()  # the service's tables and the staff's (a new data folder)
        staff = Staff(store.engine)
        if args.staff_action == "add":
            token = staff.add(args.name, args.role)
            say.line("service.staff.added", name=args.name, role=say.text(f"service.staff.role_{args.role}"))
            print(token, flush=True)  # alone on stdout: `autograder staff add ana > token.txt`
        elif args.staff_action == "revoke":
            ended = staff.revoke(args.name)
            say.out("service.staff.revoked", name=args.name, sessions=ended)
        else:
            members = staff.members()
            if not members:
                say.out("service.staff.none")
            for member in members:
                state = "revoked" if member.revoked_at else "active"
                say.out(
                    "service.staff.row",
                    name=member.name,
                    role=say.text(f"service.staff.role_{member.role}"),
                    created=member.created_at.strftime("%Y-%m-%d %H:%M UTC"),
                    state=say.text(f"service.staff.state_{state}"),
                )
        return 0
    except StaffError as exc:
        say.line(exc.key, **exc.params)
        return 1
    except SQLAlchemyError as exc:
        say.line("service.serve.database_failed", url=url, detail=str(exc)[:300])
        return 2
    finally:
        store.close()
