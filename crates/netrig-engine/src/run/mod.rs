//! The engine's entry points, each a composition of [`crate::traffic`]'s building blocks over
//! open ports: a trial ([`trial`], judged by [`validity`]), the OTG generator ([`generator`],
//! `netrig serve` and the controller's agents), [`listen`] (receive only), [`forward`] (the
//! software DUT) and [`capture`] (a capture benchmark's receiver).
pub mod capture;
pub mod forward;
pub mod generator;
pub mod listen;
pub mod trial;
pub mod validity;
