package store

// NSMember is the membership locks' namespace, so that a test can stand in
// for a replica of an older faucet.
const NSMember = nsMember

// OwnershipChannel is where replicas tell each other a round is due.
const OwnershipChannel = ownershipChannel
