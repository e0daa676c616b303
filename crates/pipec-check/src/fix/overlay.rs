//! A loader that sees the texts fixes have made in place of the files they came from, so
//! that a fixed program is checked again before anything is written (and `--diff`
//! writes nothing at all).

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use pipec_base::source::{Loader, normalize_path};

pub struct Overlay<'l> {
    inner: &'l dyn Loader,
    texts: BTreeMap<PathBuf, String>,
}

impl<'l> Overlay<'l> {
    pub fn new(inner: &'l dyn Loader) -> Overlay<'l> {
        Overlay {
            inner,
            texts: BTreeMap::new(),
        }
    }

    pub fn set(&mut self, path: &Path, text: String) {
        self.texts.insert(normalize_path(path), text);
    }

    pub fn get(&self, path: &Path) -> Option<&str> {
        self.texts.get(&normalize_path(path)).map(String::as_str)
    }
}

impl Loader for Overlay<'_> {
    fn read(&self, path: &Path) -> std::io::Result<String> {
        match self.get(path) {
            Some(text) => Ok(text.to_string()),
            None => self.inner.read(path),
        }
    }
    fn exists(&self, path: &Path) -> bool {
        self.get(path).is_some() || self.inner.exists(path)
    }
    fn is_dir(&self, path: &Path) -> bool {
        self.inner.is_dir(path)
    }
    fn absolute(&self, path: &Path) -> PathBuf {
        self.inner.absolute(path)
    }
}
