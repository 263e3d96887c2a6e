/**
 * Shell completion scripts (bash, zsh, fish) and the usersctl man page,
 * generated from the commander program itself: the same commands, options
 * and descriptions as `--help`, so they cannot drift from it.
 */
import type { Command, Option } from 'commander';
import { roff } from '../shared/roff.js';

export const SHELLS = ['bash', 'zsh', 'fish'] as const;
export type Shell = (typeof SHELLS)[number];

interface Described {
  name: string;
  description: string;
}

function visibleCommands(program: Command): Command[] {
  return program.commands.filter((c) => !(c as unknown as { _hidden?: boolean })._hidden);
}

function longFlags(options: readonly Option[]): string[] {
  return options.flatMap((o) => [o.long, o.short].filter((f): f is string => f !== undefined));
}

export function completionScript(program: Command, shell: Shell): string {
  const name = program.name();
  const commands: Described[] = visibleCommands(program).map((c) => ({ name: c.name(), description: c.description() }));
  const globals = longFlags(program.options);
  switch (shell) {
    case 'bash':
    case 'zsh': {
      const flagsOf = (c: Command) => `opts="${[...longFlags(c.options), ...globals, '--help'].join(' ')}"`;
      const cases = visibleCommands(program).map((c) => {
        const subs = visibleCommands(c);
        if (subs.length === 0) return `    ${c.name()}) ${flagsOf(c)} ;;`;
        // A command of commands (tokens): its command words first, then the chosen one's flags.
        const inner = subs.map((sub) => `${sub.name()}) ${flagsOf(sub)} ;;`).join(' ');
        return `    ${c.name()}) if [ -z "$sub" ]; then COMPREPLY=($(compgen -W "${subs.map((sub) => sub.name()).join(' ')}" -- "$cur")); return; fi; case "$sub" in ${inner} *) opts="${globals.join(' ')}" ;; esac ;;`;
      });
      return [
        `# ${name} completion for ${shell}: eval "$(${name} completion ${shell})", or save it where your shell loads completions.`,
        ...(shell === 'zsh' ? ['autoload -U +X bashcompinit && bashcompinit'] : []),
        `_${name}() {`,
        '  local cur="${COMP_WORDS[COMP_CWORD]}" command="" sub="" i opts',
        '  for ((i = 1; i < COMP_CWORD; i++)); do',
        '    case "${COMP_WORDS[i]}" in -*) ;; *) if [ -z "$command" ]; then command="${COMP_WORDS[i]}"; elif [ -z "$sub" ]; then sub="${COMP_WORDS[i]}"; fi ;; esac',
        '  done',
        '  if [ -z "$command" ]; then',
        `    COMPREPLY=($(compgen -W "${[...commands.map((c) => c.name), ...globals].join(' ')}" -- "$cur"))`,
        '    return',
        '  fi',
        '  case "$command" in',
        ...cases,
        `    *) opts="${globals.join(' ')}" ;;`,
        '  esac',
        '  if [[ "$cur" == -* ]]; then COMPREPLY=($(compgen -W "$opts" -- "$cur")); else COMPREPLY=($(compgen -f -- "$cur")); fi',
        '}',
        `complete -F _${name} ${name}`,
        '',
      ].join('\n');
    }
    case 'fish': {
      const quote = (text: string) => `'${text.replaceAll('\\', '\\\\').replaceAll("'", "\\'")}'`;
      const lines = [
        `# ${name} completion for fish: ${name} completion fish > ~/.config/fish/completions/${name}.fish`,
        `complete -c ${name} -f`,
      ];
      for (const c of commands)
        lines.push(`complete -c ${name} -n __fish_use_subcommand -a ${c.name} -d ${quote(c.description)}`);
      for (const o of program.options)
        if (o.long !== undefined) lines.push(`complete -c ${name} -l ${o.long.slice(2)} -d ${quote(o.description)}`);
      const optionLines = (condition: string, options: readonly Option[]) => {
        for (const o of options) {
          if (o.long === undefined) continue;
          lines.push(
            `complete -c ${name} -n '${condition}' -l ${o.long.slice(2)}${o.required || o.optional ? ' -r' : ''} -d ${quote(o.description)}`,
          );
        }
      };
      for (const c of visibleCommands(program)) {
        const seen = `__fish_seen_subcommand_from ${c.name()}`;
        optionLines(seen, c.options);
        for (const sub of visibleCommands(c)) {
          lines.push(`complete -c ${name} -n '${seen}' -a ${sub.name()} -d ${quote(sub.description())}`);
          optionLines(`${seen}; and __fish_seen_subcommand_from ${sub.name()}`, sub.options);
        }
      }
      return lines.join('\n') + '\n';
    }
  }
}

/**
 * The man page (section 1) of a commander program: synopsis, description, options, each command, and the help's closing
 * text.
 */
export function manPage(program: Command, date: string, version: string, after: string): string {
  const name = program.name();
  const optionLines = (options: readonly Option[]) =>
    options.flatMap((o) => ['.TP', `.B ${roff(o.flags)}`, roff(o.description)]);
  const lines = [
    `.TH ${name.toUpperCase()} 1 "${date}" "${name} ${version}" "User Commands"`,
    '.SH NAME',
    `${name} \\- ${roff(program.description())}`,
    '.SH SYNOPSIS',
    `.B ${name}`,
    '[\\fIglobal options\\fR] \\fIcommand\\fR [\\fIoptions\\fR] [\\fIarguments\\fR]',
    '.SH GLOBAL OPTIONS',
    ...optionLines(program.options),
    '.TP',
    '.B \\-h, \\-\\-help',
    "show help (also after a command: the command's help)",
    '.SH COMMANDS',
  ];
  const section = (command: Command, prefix: string) => {
    const args = command.registeredArguments
      .map((a) => (a.required ? `<${a.name()}${a.variadic ? '...' : ''}>` : `[${a.name()}${a.variadic ? '...' : ''}]`))
      .join(' ');
    lines.push(
      `.SS ${roff(`${prefix}${command.name()} ${args}`.trim())}`,
      roff(command.description()),
      ...optionLines(command.options),
    );
  };
  for (const command of visibleCommands(program)) {
    section(command, '');
    for (const sub of visibleCommands(command)) section(sub, `${command.name()} `);
  }
  lines.push('.SH NOTES', '.nf', roff(after.trim()), '.fi', '');
  return lines.join('\n');
}
