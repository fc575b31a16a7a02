//! Stage 1b: the contracts a contract imports, and the qualified names that use them.
//!
//! `imports: { orders: ../orders/warren.yaml }` loads and checks the orders contract on its
//! own (its own imports included), then resolves every `orders::<name>` the importing
//! contract writes:
//!
//! - an exchange (`bindings[].exchange`, `to_exchange`, `publishers.*.exchange`, `rpcs.*.exchange`, a dead-letter
//!   or alternate exchange) becomes its broker name, which is the owner's name for it, and is
//!   remembered as imported: the model checks it on the broker rather than declaring it;
//! - a message (`publishers.*.message`, `consumers.*.message`, an rpc's `request`,
//!   `response` and `errors`) keeps its qualified name,
//!   which is its name in this contract's model and generated code, and brings its schemas;
//! - a queue cannot be imported: a contract binds and consumes only queues it declares.
//!
//! A name the contract declares itself stays its own even when it holds `::`, so contracts
//! written before imports mean what they meant.
//!
//! An importing contract may not declare an exchange or queue its imports own, so one broker
//! name has one owner. Imported contracts' warnings are their owners' business and are not
//! repeated; their errors are, with a diagnostic at the `imports` entry.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use crate::Error;
use crate::check::{list, shown, suggest};
use crate::contract::Contract;
use crate::diagnostics::{Code, Diagnostic, Diagnostics, YamlPath};
use crate::load::{self, LoadError, LoadedContract};
use crate::syntax::{self, ArgumentValue, ContractFile};

/// Between a contract's name for an imported contract and a name in it: `orders::orders`.
pub(crate) const SEPARATOR: &str = "::";

/// How deep imports may chain (a contract importing one importing one…): far beyond any
/// real system, and a bound on what a hostile chain of contracts can cost.
pub(crate) const MAX_DEPTH: usize = 16;

/// One imported contract, checked.
#[derive(Debug, Clone)]
pub(crate) struct Import {
    /// The name the importing contract gives it.
    pub alias: String,
    /// Its path as the importing contract writes it, relative to the importing contract.
    pub written: String,
    /// The contract as read, for its format-level entries and its folders.
    pub loaded: LoadedContract,
    /// The contract's model, as checked on its own (defaults applied).
    pub contract: Arc<Contract>,
}

impl Import {
    /// How errors name the owner: `` `orders` (examples/orders/warren.yaml) ``, its path as
    /// the user reaches it.
    pub(crate) fn owner(&self) -> String {
        format!("`{}` ({})", self.alias, self.loaded.path().display())
    }

    /// How the model and generated code name the owner: `` `orders` (../orders/warren.yaml) ``,
    /// its path as the importing contract writes it, the same wherever the generator runs.
    pub(crate) fn owner_as_written(&self) -> String {
        format!("`{}` ({})", self.alias, self.written)
    }

    /// The folders its schemas may be read from: its own folder and its schema roots.
    pub(crate) fn schema_roots(&self) -> Vec<PathBuf> {
        crate::check::schema_roots(&self.loaded, &mut Diagnostics::new())
    }
}

/// What a contract imports and what of it it uses.
#[derive(Debug, Clone, Default)]
pub(crate) struct Imports {
    /// Every imported contract that loaded and passed its checks, by alias.
    pub contracts: BTreeMap<String, Import>,
    /// The imported exchanges the contract uses: broker name → alias of the owner.
    pub exchanges: BTreeMap<String, String>,
    /// The imported messages the contract uses: qualified name → (alias, name in the owner).
    pub messages: BTreeMap<String, (String, String)>,
}

impl Imports {
    /// The owner's declaration of imported exchange `name` (a broker name).
    pub(crate) fn exchange(&self, name: &str) -> Option<&syntax::Exchange> {
        let alias = self.exchanges.get(name)?;
        self.contracts.get(alias)?.loaded.file.exchanges.get(name)
    }

    /// The owner's declaration of imported message `qualified`, and its owner.
    pub(crate) fn message(&self, qualified: &str) -> Option<(&Import, &syntax::Message)> {
        let (alias, name) = self.messages.get(qualified)?;
        let import = self.contracts.get(alias)?;
        Some((import, import.loaded.file.messages.get(name)?))
    }
}

/// The contracts being checked, innermost last, and those already checked: a cycle is
/// refused and a contract imported twice (a diamond) is checked once.
#[derive(Debug, Default)]
pub(crate) struct ImportStack {
    checking: Vec<PathBuf>,
    done: BTreeMap<PathBuf, Option<Arc<Contract>>>,
}

impl ImportStack {
    /// Puts the contract checked first on the stack, so importing it back is a cycle.
    pub(crate) fn enter(&mut self, contract: &LoadedContract) {
        if let Ok(canonical) = contract.files.canonicalize(contract.path()) {
            self.checking.push(canonical);
        }
    }
}

/// Loads and checks every contract `contract` imports, then rewrites the qualified names it
/// writes (see the module docs). Problems go to `out`; the imports that could be used are
/// returned, and references to the others are left for the reference checks to report.
pub(crate) fn resolve(
    contract: &mut LoadedContract,
    stack: &mut ImportStack,
    out: &mut Diagnostics,
) -> Imports {
    let mut imports = Imports::default();
    for (alias, relative) in &contract.file.imports {
        let entry = YamlPath::root().key("imports").key(alias);
        if let Some(problem) = bad_alias(alias) {
            out.push(
                contract
                    .error_at(Code::BadImport, &entry, problem)
                    .with_help(
                        "name an import with ASCII letters, digits and `_`, starting with a letter",
                    ),
            );
            continue;
        }
        match import(contract, alias, relative, stack) {
            Ok(import) => {
                imports.contracts.insert(alias.clone(), import);
            }
            Err(Failed {
                code,
                message,
                help,
                own,
            }) => {
                out.push(contract.error_at(code, &entry, message).with_help(help));
                if let Some(own) = own {
                    // The imported contract's errors, each at its own file; its warnings are
                    // its owner's to fix.
                    out.extend(own.into_errors());
                }
            }
        }
    }
    let mut file = contract.file.clone();
    let mut resolver = Resolver {
        contract: &*contract,
        imports: &mut imports,
        out,
        known: contract.file.imports.keys().cloned().collect(),
    };
    resolver.rewrite(&mut file);
    resolver.owned_elsewhere(&file);
    contract.file = file;
    imports
}

/// Why an import could not be used.
struct Failed {
    /// The diagnostic's code: [`Code::BadImport`] unless the reason has one of its own.
    code: Code,
    message: String,
    help: &'static str,
    /// The imported contract's own problems, when it was read but is invalid.
    own: Option<Diagnostics>,
}

impl Failed {
    fn new(message: String, help: &'static str) -> Self {
        Self {
            code: Code::BadImport,
            message,
            help,
            own: None,
        }
    }
}

/// What is wrong with an import's name, which becomes part of qualified names and of Rust
/// identifiers: `None` when nothing is.
fn bad_alias(alias: &str) -> Option<String> {
    let mut chars = alias.chars();
    let starts_with_letter = chars.next().is_some_and(|c| c.is_ascii_alphabetic());
    if starts_with_letter && chars.all(|c| c.is_ascii_alphanumeric() || c == '_') {
        None
    } else {
        Some(format!("`{}` cannot name an import", shown(alias)))
    }
}

/// Whether `path` names a YAML file, as a contract is: anything else (a key, a password
/// file) is refused before it is read.
fn has_contract_extension(path: &str) -> bool {
    Path::new(path)
        .extension()
        .is_some_and(|extension| extension == "yaml" || extension == "yml")
}

/// Loads and checks the contract `relative` names, relative to `contract`'s folder.
fn import(
    contract: &LoadedContract,
    alias: &str,
    relative: &str,
    stack: &mut ImportStack,
) -> Result<Import, Failed> {
    let canonical = locate(contract, alias, relative)?;
    if stack.checking.contains(&canonical) {
        return Err(Failed::new(
            format!(
                "import `{alias}`: `{}` imports this contract back, directly or through others",
                shown(relative)
            ),
            "contracts import in one direction: move what both need into a third contract",
        ));
    }
    if stack.checking.len() >= MAX_DEPTH {
        return Err(Failed::new(
            format!("import `{alias}`: imports chain more than {MAX_DEPTH} contracts deep"),
            "import what you use directly, not through a long chain",
        ));
    }
    let shown_path = contract.paths.show(&canonical);
    let loaded = match load::load(contract.files.clone(), &shown_path) {
        Ok(loaded) => loaded,
        Err(LoadError::Io { source, .. }) => {
            return Err(Failed::new(
                format!(
                    "import `{alias}`: cannot read `{}`: {source}",
                    shown(relative)
                ),
                "fix the path; it is relative to this contract's folder",
            ));
        }
        Err(LoadError::Invalid(problems)) => return Err(invalid(alias, relative, problems)),
    };
    let checked = checked_once(&loaded, canonical, stack).map_err(|error| match error {
        Some(Error::Invalid(problems)) => invalid(alias, relative, problems),
        // Checked before, with errors reported then: said once more, without repeating them.
        None => invalid(alias, relative, Diagnostics::new()),
        Some(other) => Failed::new(
            format!("import `{alias}`: {other}"),
            "fix the imported contract",
        ),
    })?;
    Ok(Import {
        alias: alias.to_owned(),
        written: relative.to_owned(),
        loaded,
        contract: checked,
    })
}

/// The canonical path of the contract file `relative` names, relative to `contract`'s
/// folder: a relative path to a `.yaml` or `.yml` file inside the project, found before
/// anything is read (an import's YAML errors quote its lines).
fn locate(contract: &LoadedContract, alias: &str, relative: &str) -> Result<PathBuf, Failed> {
    if Path::new(relative).is_absolute() || relative.trim().is_empty() {
        return Err(Failed::new(
            format!(
                "import `{alias}`: `{}` is not a relative path",
                shown(relative)
            ),
            "write the path relative to this contract's folder, as `schema_roots` are",
        ));
    }
    if !has_contract_extension(relative) {
        return Err(Failed::new(
            format!(
                "import `{alias}`: `{}` is not a contract file (`.yaml` or `.yml`)",
                shown(relative)
            ),
            "name the imported contract's `warren.yaml`, relative to this contract's folder",
        ));
    }
    let files = &contract.files;
    let missing = || {
        Failed::new(
            format!(
                "import `{alias}`: `{}` is not a contract file",
                shown(relative)
            ),
            "fix the path; it is relative to this contract's folder",
        )
    };
    let canonical = files
        .canonicalize(&contract.paths.contract_dir().join(relative))
        .map_err(|_| missing())?;
    if !files.in_project(&canonical) {
        return Err(Failed {
            code: Code::OutsideProject,
            ..Failed::new(
                format!(
                    "import `{alias}`: `{}` is outside the project folder `{}`",
                    shown(relative),
                    contract.project_shown()
                ),
                crate::project::outside_help(),
            )
        });
    }
    if files.is_dir(&canonical) {
        return Err(missing());
    }
    Ok(canonical)
}

/// The model of `loaded` (at `canonical`), checked once however many contracts import it:
/// `Err(None)` when it was checked before and failed (its errors were reported then).
fn checked_once(
    loaded: &LoadedContract,
    canonical: PathBuf,
    stack: &mut ImportStack,
) -> Result<Arc<Contract>, Option<Error>> {
    match stack.done.get(&canonical) {
        Some(Some(contract)) => return Ok(contract.clone()),
        Some(None) => return Err(None),
        None => {}
    }
    stack.checking.push(canonical.clone());
    let result = crate::check_loaded_in(loaded.clone(), stack, crate::check::Scope::Alone);
    stack.checking.pop();
    match result {
        Ok(checked) => {
            let contract = Arc::new(checked.contract);
            stack.done.insert(canonical, Some(contract.clone()));
            Ok(contract)
        }
        Err(error) => {
            stack.done.insert(canonical, None);
            Err(Some(error))
        }
    }
}

fn invalid(alias: &str, relative: &str, problems: Diagnostics) -> Failed {
    Failed {
        own: Some(problems),
        ..Failed::new(
            format!(
                "import `{alias}`: the contract `{}` has errors of its own",
                shown(relative)
            ),
            "its errors are listed with its file; fix them there, or ask its owners",
        )
    }
}

/// Rewrites the qualified names of one contract, reporting the ones that name nothing.
struct Resolver<'a> {
    contract: &'a LoadedContract,
    imports: &'a mut Imports,
    out: &'a mut Diagnostics,
    /// Every alias written under `imports`, usable or not: a name qualified with an import
    /// that failed is not reported again.
    known: Vec<String>,
}

/// What a qualified name names.
#[derive(Clone, Copy)]
enum Imported {
    Exchange,
    Message,
}

impl Resolver<'_> {
    fn rewrite(&mut self, file: &mut ContractFile) {
        let entry = |section: &str, name: &str| YamlPath::root().key(section).key(name);
        for (name, exchange) in &mut file.exchanges {
            let path = entry("exchanges", name);
            if let Some(alternate) = &mut exchange.alternate_exchange {
                self.exchange(alternate, &path.key("alternate_exchange"));
            }
            self.raw_exchange(&mut exchange.arguments, "alternate-exchange", &path);
        }
        for (name, queue) in &mut file.queues {
            let path = entry("queues", name);
            if let Some(dead_letter) = &mut queue.dead_letter {
                self.exchange(
                    &mut dead_letter.exchange,
                    &path.key("dead_letter").key("exchange"),
                );
            }
            self.raw_exchange(&mut queue.arguments, "x-dead-letter-exchange", &path);
        }
        for (i, binding) in file.bindings.iter_mut().enumerate() {
            let path = YamlPath::root().key("bindings").index(i);
            self.exchange(&mut binding.exchange, &path.key("exchange"));
            if let Some(to) = &mut binding.to_exchange {
                self.exchange(to, &path.key("to_exchange"));
            }
            if let Some(queue) = &binding.queue {
                self.queue(queue, &path.key("queue"));
            }
        }
        for (name, publisher) in &mut file.publishers {
            let path = entry("publishers", name);
            self.exchange(&mut publisher.exchange, &path.key("exchange"));
            self.message(&publisher.message, &path.key("message"));
        }
        for (name, consumer) in &file.consumers {
            let path = entry("consumers", name);
            self.queue(&consumer.queue, &path.key("queue"));
            for (message, at) in consumer.consumed_at(&path) {
                self.message(message, &at);
            }
        }
        for (name, rpc) in &mut file.rpcs {
            let path = entry("rpcs", name);
            if let Some(exchange) = &mut rpc.exchange {
                self.exchange(exchange, &path.key("exchange"));
            }
            self.queue(&rpc.queue, &path.key("queue"));
            self.message(&rpc.request, &path.key("request"));
            self.message(&rpc.response, &path.key("response"));
            for (code, message) in &rpc.errors {
                self.message(message, &path.key("errors").key(code));
            }
        }
    }

    /// A raw argument naming an exchange, resolved like the typed field it stands for.
    fn raw_exchange(
        &mut self,
        arguments: &mut BTreeMap<String, ArgumentValue>,
        key: &str,
        owner: &YamlPath,
    ) {
        if let Some(ArgumentValue::String(name)) = arguments.get_mut(key) {
            self.exchange(name, &owner.key("arguments").key(key));
        }
    }

    /// An exchange reference: a qualified one becomes the owner's broker name.
    fn exchange(&mut self, name: &mut String, path: &YamlPath) {
        if let Some((alias, local)) = self.lookup(name, Imported::Exchange, path) {
            self.imports.exchanges.insert(local.clone(), alias);
            *name = local;
        }
    }

    /// A queue reference: a qualified one is refused.
    fn queue(&mut self, name: &str, path: &YamlPath) {
        if name.contains(SEPARATOR) && !self.contract.file.queues.contains_key(name) {
            self.error(
                Code::OwnedElsewhere,
                path,
                format!(
                    "queue `{}` belongs to another contract; a contract binds and consumes only queues it declares",
                    shown(name)
                ),
                "declare a queue of your own bound to the imported exchange, or run the owner's consumer from its contract (see `warren generate --consumer`)",
            );
        }
    }

    /// A message reference: a qualified one is remembered with its owner.
    fn message(&mut self, name: &str, path: &YamlPath) {
        if let Some((alias, local)) = self.lookup(name, Imported::Message, path) {
            self.imports
                .messages
                .insert(name.to_owned(), (alias, local));
        }
    }

    /// Splits a qualified name and finds what it names, reporting it when nothing: `None`
    /// for an unqualified name and for a qualified one that names nothing.
    fn lookup(&mut self, name: &str, kind: Imported, path: &YamlPath) -> Option<(String, String)> {
        // A name the contract declares itself is its own, `::` or not: contracts written
        // before imports keep meaning what they meant.
        let own = &self.contract.file;
        let declared = match kind {
            Imported::Exchange => own.exchanges.contains_key(name),
            Imported::Message => own.messages.contains_key(name),
        };
        if declared {
            return None;
        }
        let (alias, local) = name.split_once(SEPARATOR)?;
        let Some(import) = self.imports.contracts.get(alias) else {
            if !self.known.iter().any(|known| known == alias) {
                let help = match suggest(alias, &self.known) {
                    Some(close) => format!(
                        "did you mean `{close}{SEPARATOR}{}`? Otherwise add `{alias}` under `imports`",
                        shown(local)
                    ),
                    None => format!(
                        "import the contract that owns it: `imports: {{ {alias}: <path to its warren.yaml> }}`"
                    ),
                };
                self.error(
                    Code::UnknownImport,
                    path,
                    format!("`{}` names no imported contract `{alias}`", shown(name)),
                    help,
                );
            }
            return None;
        };
        let file = &import.loaded.file;
        let (names, code, noun): (Vec<&String>, _, _) = match kind {
            Imported::Exchange => (
                file.exchanges.keys().collect(),
                Code::UnknownExchange,
                "exchange",
            ),
            Imported::Message => (
                file.messages.keys().collect(),
                Code::UnknownMessage,
                "message",
            ),
        };
        if names.iter().any(|n| *n == local) {
            return Some((alias.to_owned(), local.to_owned()));
        }
        let owner = import.owner();
        let help = match suggest(local, names.iter().copied()) {
            Some(close) => format!("did you mean `{alias}{SEPARATOR}{close}`?"),
            None => format!(
                "{owner} declares the {noun}s {}",
                list(names.iter().map(|n| n.as_str()).take(12))
            ),
        };
        self.error(
            code,
            path,
            format!("contract {owner} declares no {noun} `{}`", shown(local)),
            help,
        );
        None
    }

    /// An exchange or queue this contract declares under a name an imported contract
    /// declares too: one broker name, two owners.
    fn owned_elsewhere(&mut self, file: &ContractFile) {
        let mut owned = Vec::new();
        for import in self.imports.contracts.values() {
            let theirs = &import.loaded.file;
            for name in file.exchanges.keys() {
                if theirs.exchanges.contains_key(name) {
                    owned.push((
                        "exchange",
                        "exchanges",
                        name.clone(),
                        import.alias.clone(),
                        import.owner(),
                    ));
                }
            }
            for name in file.queues.keys() {
                if theirs.queues.contains_key(name) {
                    owned.push((
                        "queue",
                        "queues",
                        name.clone(),
                        import.alias.clone(),
                        import.owner(),
                    ));
                }
            }
        }
        for (noun, section, name, alias, owner) in owned {
            let help = if noun == "exchange" {
                format!(
                    "remove it here and write `{alias}{SEPARATOR}{}` where you use it",
                    shown(&name)
                )
            } else {
                "rename this queue: queues belong to the contract that declares them".to_owned()
            };
            self.error(
                Code::OwnedElsewhere,
                &YamlPath::root().key(section).key(&name),
                format!(
                    "{noun} `{}` is declared by the imported contract {owner}; this contract would declare it too",
                    shown(&name)
                ),
                help,
            );
        }
    }

    fn error(&mut self, code: Code, path: &YamlPath, message: String, help: impl Into<String>) {
        let diagnostic: Diagnostic = self.contract.error_at(code, path, message).with_help(help);
        self.out.push(diagnostic);
    }
}
